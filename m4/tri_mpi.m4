# TRI_CHECK_MPI: the C compiler must be an MPI wrapper (mpicc) that links
# MPI_Init. configure.ac picks mpicc with AC_PROG_CC([mpicc]) first.
AC_DEFUN([TRI_CHECK_MPI], [
  AC_MSG_CHECKING([whether $CC compiles and links MPI programs])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
                   [[int argc = 0; char **argv = 0; MPI_Init(&argc, &argv); MPI_Finalize();]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([MPI not found: trident needs an MPI C compiler. Install Open MPI (Debian: libopenmpi-dev openmpi-bin) or run ./configure CC=/path/to/mpicc])])
  AC_PATH_PROGS([MPIEXEC], [mpiexec mpirun], [none])
  tri_mpi_summary="yes ($CC)"
])
