# TRI_CHECK_CUDNN: --with-cudnn-frontend=DIR, cuDNN's fused attention
# (kernels/cuda/attention_cudnn_cuda.cu) through NVIDIA's header-only C++
# frontend (github.com/NVIDIA/cudnn-frontend, MIT), which the user
# installs: DIR/include/cudnn_frontend.h. Needs CUDA and cuDNN 9 (cudnn.h
# and libcudnn beside CUDA's, or on the compiler's paths), and NVRTC, which
# the frontend's runtime-compiled engines call. Default off; off
# changes nothing. Asked for and missing: an error. Sets TRI_HAVE_CUDNN to
# 0 or 1, always; CUDNN_NVCCFLAGS takes the frontend with -isystem, so its
# own warnings do not break --enable-werror.
AC_DEFUN([TRI_CHECK_CUDNN], [
  AC_REQUIRE([TRI_CHECK_CUDA])
  AC_ARG_WITH([cudnn-frontend],
    [AS_HELP_STRING([--with-cudnn-frontend=DIR],
      [cuDNN's fused attention through the cudnn-frontend headers in DIR/include (default: no)])],
    [], [with_cudnn_frontend=no])
  tri_have_cudnn=0
  tri_cudnn_summary=no
  CUDNN_NVCCFLAGS=""
  CUDNN_LIBS=""
  AS_CASE(["x$with_cudnn_frontend"],
    [xno], [],
    [xyes|x], [AC_MSG_ERROR([--with-cudnn-frontend needs the frontend's directory: --with-cudnn-frontend=DIR, with DIR/include/cudnn_frontend.h])],
    [AS_IF([test $tri_have_cuda = 0],
       [AC_MSG_ERROR([--with-cudnn-frontend needs CUDA: add --with-cuda])])
     AS_IF([test -f "$with_cudnn_frontend/include/cudnn_frontend.h"], [],
       [AC_MSG_ERROR([--with-cudnn-frontend=$with_cudnn_frontend: no $with_cudnn_frontend/include/cudnn_frontend.h (get it from https://github.com/NVIDIA/cudnn-frontend)])])
     tri_save_CPPFLAGS="$CPPFLAGS"
     tri_save_LDFLAGS="$LDFLAGS"
     tri_save_LIBS="$LIBS"
     CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
     LDFLAGS="$LDFLAGS -L$CUDA_HOME/lib64 -L$CUDA_HOME/lib"
     tri_cudnn_ok=no
     AC_CHECK_HEADER([cudnn.h],
       [AC_CHECK_LIB([cudnn], [cudnnCreate],
         [AC_CHECK_LIB([nvrtc], [nvrtcVersion], [tri_cudnn_ok=yes], [], [$CUDA_LIBS])],
         [], [$CUDA_LIBS])])
     CPPFLAGS="$tri_save_CPPFLAGS"
     LDFLAGS="$tri_save_LDFLAGS"
     LIBS="$tri_save_LIBS"
     AS_IF([test "x$tri_cudnn_ok" = xyes], [],
       [AC_MSG_ERROR([--with-cudnn-frontend given but cudnn.h, libcudnn or libnvrtc was not found beside CUDA ($CUDA_HOME) or on the compiler's paths (install cuDNN 9)])])
     tri_cudnn_inc=`cd "$with_cudnn_frontend/include" && pwd`
     tri_have_cudnn=1
     CUDNN_NVCCFLAGS="-isystem $tri_cudnn_inc"
     CUDNN_LIBS="-lcudnn -lnvrtc"
     tri_cudnn_summary="yes (frontend $tri_cudnn_inc)"])
  AC_DEFINE_UNQUOTED([TRI_HAVE_CUDNN], [$tri_have_cudnn], [1 if cuDNN's fused attention is built])
  AC_SUBST([CUDNN_NVCCFLAGS])
  AC_SUBST([CUDNN_LIBS])
])
