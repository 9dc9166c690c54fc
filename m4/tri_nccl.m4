# TRI_CHECK_NCCL: --with-nccl[=DIR], as --with-cuda; requires CUDA.
# Sets TRI_HAVE_NCCL to 0 or 1, always.
AC_DEFUN([TRI_CHECK_NCCL], [
  AC_REQUIRE([TRI_CHECK_CUDA])
  AC_ARG_WITH([nccl],
    [AS_HELP_STRING([--with-nccl@<:@=DIR@:>@], [NCCL collectives on GPUs (default: auto with CUDA)])],
    [], [with_nccl=check])
  tri_have_nccl=0
  tri_nccl_summary=no
  NCCL_CPPFLAGS=""
  NCCL_LIBS=""
  AS_IF([test "x$with_nccl" != xno && test $tri_have_cuda = 0 && test "x$with_nccl" != xcheck],
        [AC_MSG_ERROR([--with-nccl needs CUDA: add --with-cuda])])
  AS_IF([test "x$with_nccl" != xno && test $tri_have_cuda = 1],
    [AS_CASE(["x$with_nccl"],
       [xyes|xcheck], [tri_nccl_dir="$CUDA_HOME"],
       [tri_nccl_dir="$with_nccl"])
     tri_nccl_libdir="$tri_nccl_dir/lib64"
     test -d "$tri_nccl_libdir" || tri_nccl_libdir="$tri_nccl_dir/lib"
     tri_save_CPPFLAGS="$CPPFLAGS"
     tri_save_LDFLAGS="$LDFLAGS"
     tri_save_LIBS="$LIBS"
     CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS -I$tri_nccl_dir/include"
     LDFLAGS="$LDFLAGS -L$tri_nccl_libdir"
     tri_nccl_ok=no
     AC_CHECK_HEADER([nccl.h],
       [AC_CHECK_LIB([nccl], [ncclCommInitRank], [tri_nccl_ok=yes], [], [$CUDA_LIBS])])
     CPPFLAGS="$tri_save_CPPFLAGS"
     LDFLAGS="$tri_save_LDFLAGS"
     LIBS="$tri_save_LIBS"
     AS_IF([test "x$tri_nccl_ok" = xyes],
       [tri_have_nccl=1
        NCCL_CPPFLAGS="-I$tri_nccl_dir/include"
        NCCL_LIBS="-L$tri_nccl_libdir -Wl,-rpath,$tri_nccl_libdir -lnccl"
        tri_nccl_summary="yes ($tri_nccl_dir)"],
       [test "x$with_nccl" != xcheck],
       [AC_MSG_ERROR([--with-nccl given but nccl.h or libnccl was not found under $tri_nccl_dir])])])
  AC_DEFINE_UNQUOTED([TRI_HAVE_NCCL], [$tri_have_nccl], [1 if NCCL collectives are built])
  AC_SUBST([NCCL_CPPFLAGS])
  AC_SUBST([NCCL_LIBS])
])
