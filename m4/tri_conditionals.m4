# TRI_DO_AM_CONDITIONALS: every AM_CONDITIONAL in one unconditional place,
# so automake sees them all whatever the configure path (hwloc's rule).
AC_DEFUN([TRI_DO_AM_CONDITIONALS], [
  AM_CONDITIONAL([HAVE_CUDA], [test "x$tri_have_cuda" = x1])
  AM_CONDITIONAL([HAVE_NCCL], [test "x$tri_have_nccl" = x1])
  AM_CONDITIONAL([HAVE_CUDNN], [test "x$tri_have_cudnn" = x1])
  AM_CONDITIONAL([GEMM_DNNL], [test "x$tri_gemm" = xdnnl])
  AM_CONDITIONAL([GEMM_CBLAS], [test "x$tri_gemm" = xcblas])
  AM_CONDITIONAL([SANITIZERS], [test "x$enable_sanitizers" = xyes])
])
