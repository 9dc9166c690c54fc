# TRI_CHECK_FENCE: how much of the kernels fence can be enforced. kernels/
# is compiled with CC, CPPFLAGS, CFLAGS and its own flags only (no MPI,
# HDF5, inih or src/ flags: kernels/Makefile.inc), so that a kernel that
# includes mpi.h, hdf5.h or a src/ header fails to compile, and `make
# check-fence` proves it. For mpi.h and hdf5.h that holds only while CC and
# the user's flags do not find them by themselves (mpicc or Cray's cc as
# CC find mpi.h): then the build still works, and the summary says which
# header the fence cannot keep out. src/ headers are always kept out.
# Sets TRI_FENCE_HEADERS (the system headers check-fence probes) and
# tri_fence_summary.
AC_DEFUN([TRI_CHECK_FENCE], [
  AC_REQUIRE([TRI_CHECK_MPI])
  AC_MSG_CHECKING([whether $CC finds hdf5.h by itself])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <hdf5.h>]], [[]])],
    [tri_cc_finds_hdf5=yes], [tri_cc_finds_hdf5=no])
  AC_MSG_RESULT([$tri_cc_finds_hdf5])
  TRI_FENCE_HEADERS=""
  tri_found=""
  AS_IF([test "x$tri_cc_finds_mpi" = xyes], [tri_found="mpi.h"],
        [TRI_FENCE_HEADERS="mpi.h"])
  AS_IF([test "x$tri_cc_finds_hdf5" = xyes], [tri_found="$tri_found${tri_found:+ and }hdf5.h"],
        [TRI_FENCE_HEADERS="$TRI_FENCE_HEADERS hdf5.h"])
  AS_IF([test -z "$tri_found"],
    [tri_fence_summary="enforced ($CC without MPI, HDF5 or src/ flags)"],
    [tri_fence_summary="not enforced for $tri_found, which $CC finds by itself; src/ still fenced"])
  AC_SUBST([TRI_FENCE_HEADERS])
])
