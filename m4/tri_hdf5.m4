# TRI_CHECK_HDF5: parallel HDF5 (MPI-IO driver). --with-hdf5=DIR points at an
# install prefix; otherwise pkg-config (hdf5-openmpi, hdf5-mpi, hdf5) and then
# the compiler's defaults are tried. A serial HDF5 is refused: checkpoints are
# written collectively by every rank. Its header includes mpi.h, so the
# checks add MPI's flags (TRI_CHECK_MPI).
AC_DEFUN([TRI_CHECK_HDF5], [
  AC_ARG_WITH([hdf5],
    [AS_HELP_STRING([--with-hdf5=DIR], [parallel HDF5 install prefix (default: pkg-config)])],
    [], [with_hdf5=check])
  AS_IF([test "x$with_hdf5" = xno],
        [AC_MSG_ERROR([trident needs parallel HDF5 for checkpoints; --without-hdf5 is not possible])])
  HDF5_CFLAGS=""
  HDF5_LIBS=""
  AS_IF([test "x$with_hdf5" != xcheck && test "x$with_hdf5" != xyes],
    [HDF5_CFLAGS="-I$with_hdf5/include"
     HDF5_LIBS="-L$with_hdf5/lib -lhdf5"],
    [PKG_CHECK_MODULES([HDF5], [hdf5-openmpi], [],
      [PKG_CHECK_MODULES([HDF5], [hdf5-mpi], [],
        [PKG_CHECK_MODULES([HDF5], [hdf5], [], [HDF5_LIBS="-lhdf5"])])])])
  AC_REQUIRE([TRI_CHECK_MPI])
  tri_save_CPPFLAGS="$CPPFLAGS"
  tri_save_LIBS="$LIBS"
  CPPFLAGS="$CPPFLAGS $HDF5_CFLAGS $MPI_CFLAGS"
  LIBS="$HDF5_LIBS $MPI_LIBS $LIBS"
  AC_CHECK_HEADER([hdf5.h], [],
    [AC_MSG_ERROR([hdf5.h not found. Install parallel HDF5 (Debian: libhdf5-openmpi-dev) or pass --with-hdf5=DIR])])
  AC_MSG_CHECKING([whether HDF5 is built for parallel I/O])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <hdf5.h>
#if !H5_HAVE_PARALLEL
#error serial HDF5
#endif]], [[]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([this HDF5 is serial (H5_HAVE_PARALLEL is 0). trident writes checkpoints from every rank through MPI-IO and needs parallel HDF5 (Debian: libhdf5-openmpi-dev; modules: a *-mpi or *-parallel hdf5)])])
  AC_MSG_CHECKING([for H5Pset_fapl_mpio])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <hdf5.h>]],
                   [[hid_t p = H5Pcreate(H5P_FILE_ACCESS); H5Pset_fapl_mpio(p, MPI_COMM_WORLD, MPI_INFO_NULL);]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([cannot link a parallel HDF5 program with: $HDF5_LIBS])])
  CPPFLAGS="$tri_save_CPPFLAGS"
  LIBS="$tri_save_LIBS"
  AC_SUBST([HDF5_CFLAGS])
  AC_SUBST([HDF5_LIBS])
  tri_hdf5_summary="parallel ($HDF5_LIBS)"
])
