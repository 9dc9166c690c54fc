# TRI_CHECK_GEMM: the CPU GEMM library behind kernels/cpu/gemm_cpu.c; the
# build compiles its file, kernels/cpu/gemm_dnnl.c or gemm_cblas.c.
#   --with-gemm=dnnl   oneDNN's dnnl_sgemm (and bf16 matmul); detects the CPU
#                      by itself, threads with the same OpenMP pool as ours
#   --with-gemm=cblas  any CBLAS (OpenBLAS, BLIS, MKL's cblas); CBLAS_LIBS=...
#                      and CBLAS_CFLAGS=... where it is not in the default paths
#   --with-gemm=auto   (default) dnnl if present, else cblas
# Defines TRI_GEMM_DNNL / TRI_GEMM_CBLAS (0 or 1); GEMM_CFLAGS and GEMM_LIBS
# are the library's flags (the kernels' only compile flags beyond C's).
AC_DEFUN([TRI_CHECK_GEMM], [
  AC_ARG_WITH([gemm],
    [AS_HELP_STRING([--with-gemm=auto|dnnl|cblas], [CPU GEMM library (default: auto, dnnl first)])],
    [], [with_gemm=auto])
  AC_ARG_VAR([CBLAS_LIBS], [linker flags for a CBLAS (default: -lopenblas, then -lcblas, then -lblas)])
  AC_ARG_VAR([CBLAS_CFLAGS], [compile flags for a CBLAS whose cblas.h is not in the default paths])
  tri_gemm=none
  GEMM_CFLAGS=""
  AS_IF([test "x$with_gemm" = xauto || test "x$with_gemm" = xdnnl],
    [tri_save_LIBS="$LIBS"
     AC_CHECK_HEADER([oneapi/dnnl/dnnl.h],
       [AC_CHECK_LIB([dnnl], [dnnl_sgemm], [tri_gemm=dnnl; GEMM_LIBS="-ldnnl"])])
     LIBS="$tri_save_LIBS"
     AS_IF([test "x$tri_gemm" = xnone && test "x$with_gemm" = xdnnl],
           [AC_MSG_ERROR([--with-gemm=dnnl given but oneDNN was not found (Debian: libdnnl-dev)])])])
  AS_IF([test "x$tri_gemm" = xnone && test "x$with_gemm" != xdnnl],
    [tri_save_CPPFLAGS="$CPPFLAGS"
     CPPFLAGS="$CPPFLAGS $CBLAS_CFLAGS"
     AC_CHECK_HEADER([cblas.h], [], [AS_IF([test "x$with_gemm" = xcblas],
       [AC_MSG_ERROR([cblas.h not found (Debian: libopenblas-dev; elsewhere set CBLAS_CFLAGS)])])])
     CPPFLAGS="$tri_save_CPPFLAGS"
     tri_save_LIBS="$LIBS"
     for tri_lib in "$CBLAS_LIBS" -lopenblas -lcblas -lblas; do
       test -n "$tri_lib" || continue
       LIBS="$tri_lib $tri_save_LIBS"
       AC_MSG_CHECKING([for cblas_sgemm in $tri_lib])
       AC_LINK_IFELSE([AC_LANG_CALL([], [cblas_sgemm])],
         [AC_MSG_RESULT([yes]); tri_gemm=cblas; GEMM_LIBS="$tri_lib"; GEMM_CFLAGS="$CBLAS_CFLAGS"; break],
         [AC_MSG_RESULT([no])])
     done
     LIBS="$tri_save_LIBS"])
  AS_IF([test "x$tri_gemm" = xnone],
        [AC_MSG_ERROR([no GEMM library found: install oneDNN (Debian: libdnnl-dev) or a CBLAS (libopenblas-dev)])])
  AS_IF([test "x$tri_gemm" = xdnnl], [tri_gemm_dnnl=1], [tri_gemm_dnnl=0])
  AS_IF([test "x$tri_gemm" = xcblas], [tri_gemm_cblas=1], [tri_gemm_cblas=0])
  AC_DEFINE_UNQUOTED([TRI_GEMM_DNNL], [$tri_gemm_dnnl], [1 if GEMMs run through oneDNN])
  AC_DEFINE_UNQUOTED([TRI_GEMM_CBLAS], [$tri_gemm_cblas], [1 if GEMMs run through a CBLAS])
  AC_SUBST([GEMM_CFLAGS])
  AC_SUBST([GEMM_LIBS])
  tri_gemm_summary="$tri_gemm ($GEMM_LIBS)"
])
