# TRI_CHECK_CUDA: --with-cuda[=DIR]. Absent: detect; no: skip; given: must
# work. Needs nvcc, cudart and cuBLAS. Sets TRI_HAVE_CUDA to 0 or 1, always.
# --with-cuda-arch="80 90" chooses the SM architectures (default 80 and 90).
AC_DEFUN([TRI_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [CUDA kernels and cuBLAS (default: auto, /usr/local/cuda)])],
    [], [with_cuda=check])
  AC_ARG_WITH([cuda-arch],
    [AS_HELP_STRING([--with-cuda-arch="80 90"], [SM architectures to build (default: 80 90)])],
    [], [with_cuda_arch="80 90"])
  AC_ARG_VAR([NVCC], [CUDA compiler])
  AC_ARG_VAR([NVCCFLAGS], [flags for nvcc])
  tri_have_cuda=0
  tri_cuda_summary=no
  CUDA_CPPFLAGS=""
  CUDA_LIBS=""
  AS_CASE(["x$with_cuda"],
    [xno], [],
    [xyes|xcheck], [tri_cuda_dir=/usr/local/cuda],
    [tri_cuda_dir="$with_cuda"])
  AS_IF([test "x$with_cuda" != xno],
    [AC_PATH_PROG([NVCC], [nvcc], [none], [$tri_cuda_dir/bin$PATH_SEPARATOR$PATH])
     tri_cuda_ok=no
     AS_IF([test "x$NVCC" != xnone],
       [tri_cuda_home=`AS_DIRNAME(["$NVCC"])`
        tri_cuda_home=`AS_DIRNAME(["$tri_cuda_home"])`
        tri_cuda_libdir="$tri_cuda_home/lib64"
        test -d "$tri_cuda_libdir" || tri_cuda_libdir="$tri_cuda_home/lib"
        tri_save_CPPFLAGS="$CPPFLAGS"
        tri_save_LDFLAGS="$LDFLAGS"
        tri_save_LIBS="$LIBS"
        CPPFLAGS="$CPPFLAGS -I$tri_cuda_home/include"
        LDFLAGS="$LDFLAGS -L$tri_cuda_libdir"
        AC_CHECK_HEADER([cuda_runtime_api.h],
          [AC_CHECK_HEADER([cublas_v2.h],
            [AC_CHECK_LIB([cudart], [cudaGetDeviceCount],
              [AC_CHECK_LIB([cublas], [cublasCreate_v2], [tri_cuda_ok=yes])])])])
        CPPFLAGS="$tri_save_CPPFLAGS"
        LDFLAGS="$tri_save_LDFLAGS"
        LIBS="$tri_save_LIBS"])
     AS_IF([test "x$tri_cuda_ok" = xyes],
       [tri_have_cuda=1
        CUDA_CPPFLAGS="-I$tri_cuda_home/include"
        CUDA_LIBS="-L$tri_cuda_libdir -Wl,-rpath,$tri_cuda_libdir -lcublasLt -lcublas -lcudart -ldl"
        CUDA_HOME="$tri_cuda_home"
        NVCC_GENCODE=""
        for tri_sm in $with_cuda_arch; do
          NVCC_GENCODE="$NVCC_GENCODE -gencode arch=compute_$tri_sm,code=sm_$tri_sm"
        done
        tri_cuda_summary="yes ($tri_cuda_home, sm: $with_cuda_arch)"],
       [test "x$with_cuda" != xcheck],
       [AC_MSG_ERROR([--with-cuda given but nvcc, cudart or cuBLAS was not found under $tri_cuda_dir])])])
  AC_DEFINE_UNQUOTED([TRI_HAVE_CUDA], [$tri_have_cuda], [1 if CUDA kernels are built])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LIBS])
  AC_SUBST([CUDA_HOME])
  AC_SUBST([NVCC_GENCODE])
])
