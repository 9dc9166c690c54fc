# TRI_CHECK_MPI: MPI's compile and link flags for src/, the tests and the
# link, kept apart from CC so that kernels/ is compiled without them and an
# `#include <mpi.h>` there fails (the kernels fence, DEVELOPERS.md).
#
# CC is the plain C compiler (AC_PROG_CC). MPI_CFLAGS and MPI_LIBS are, in
# order: what the user set; nothing when CC finds mpi.h by itself (CC=mpicc,
# Cray's cc: accepted, but then the fence is not enforced); what the
# wrapper $MPICC (default mpicc) says: `--showme:compile` and
# `--showme:link` (Open MPI), else the words of `-show` (MPICH, Intel MPI,
# MVAPICH); else pkg-config's ompi-c or mpich. Whatever the source, CC
# must then compile and link an MPI program with them.
#
# Sets tri_cc_finds_mpi (yes or no) for TRI_CHECK_FENCE.
AC_DEFUN([TRI_CHECK_MPI], [
  AC_REQUIRE([PKG_PROG_PKG_CONFIG])
  AC_ARG_VAR([MPICC], [MPI C compiler wrapper that configure asks for MPI's flags (default: mpicc)])
  AC_ARG_VAR([MPI_CFLAGS], [MPI's compile flags (default: from $MPICC)])
  AC_ARG_VAR([MPI_LIBS], [MPI's link flags (default: from $MPICC)])

  AC_MSG_CHECKING([whether $CC finds mpi.h by itself])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]], [[]])],
    [tri_cc_finds_mpi=yes], [tri_cc_finds_mpi=no])
  AC_MSG_RESULT([$tri_cc_finds_mpi])

  AS_IF([test -n "$MPI_CFLAGS$MPI_LIBS"],
    [tri_mpi_from="MPI_CFLAGS, MPI_LIBS"],
    [test "x$tri_cc_finds_mpi" = xyes],
    [tri_mpi_from="$CC"],
    [AC_PATH_PROGS([MPICC], [mpicc], [none])
     AS_IF([test "x$MPICC" != xnone],
       [AC_MSG_CHECKING([for MPI's flags from $MPICC])
        AS_IF([tri_mpi_c=`$MPICC --showme:compile 2>/dev/null` &&
               tri_mpi_l=`$MPICC --showme:link 2>/dev/null`],
          [MPI_CFLAGS="$tri_mpi_c"
           MPI_LIBS="$tri_mpi_l"
           tri_mpi_from="$MPICC --showme"],
          [tri_mpi_show=`$MPICC -show 2>/dev/null`],
          [dnl the compiler's name and -c, -O2 etc. fall through the case
           for tri_w in $tri_mpi_show; do
             AS_CASE(["$tri_w"],
               [-I*|-D*], [MPI_CFLAGS="$MPI_CFLAGS $tri_w"],
               [-L*|-l*|-Wl,*|-pthread], [MPI_LIBS="$MPI_LIBS $tri_w"])
           done
           tri_mpi_from="$MPICC -show"])
        AS_IF([test -n "$tri_mpi_from"], [AC_MSG_RESULT([$MPI_CFLAGS $MPI_LIBS])],
              [AC_MSG_RESULT([none])])])
     AS_IF([test -z "$tri_mpi_from"],
       [PKG_CHECK_MODULES([MPI], [ompi-c], [tri_mpi_from="pkg-config ompi-c"],
         [PKG_CHECK_MODULES([MPI], [mpich], [tri_mpi_from="pkg-config mpich"], [:])])])])

  tri_save_CPPFLAGS="$CPPFLAGS"
  tri_save_LIBS="$LIBS"
  CPPFLAGS="$CPPFLAGS $MPI_CFLAGS"
  LIBS="$MPI_LIBS $LIBS"
  AC_MSG_CHECKING([whether $CC compiles and links MPI programs with $MPI_CFLAGS $MPI_LIBS])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
                   [[int argc = 0; char **argv = 0; MPI_Init(&argc, &argv); MPI_Finalize();]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([MPI not found: trident needs MPI. Install Open MPI (Debian: libopenmpi-dev openmpi-bin), put its mpicc on PATH or pass MPICC=/path/to/mpicc, or set MPI_CFLAGS and MPI_LIBS])])
  CPPFLAGS="$tri_save_CPPFLAGS"
  LIBS="$tri_save_LIBS"
  AC_SUBST([MPI_CFLAGS])
  AC_SUBST([MPI_LIBS])
  AC_PATH_PROGS([MPIEXEC], [mpiexec mpirun], [none])
  AS_IF([test "x$tri_mpi_from" = "x$CC"],
    [tri_mpi_summary="yes ($CC compiles MPI programs by itself)"],
    [tri_mpi_summary="yes ($CC with the flags of $tri_mpi_from)"])
])
