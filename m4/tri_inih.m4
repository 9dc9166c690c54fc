# TRI_CHECK_INIH: libinih, the INI reader behind config.c.
AC_DEFUN([TRI_CHECK_INIH], [
  PKG_CHECK_MODULES([INIH], [inih], [],
    [INIH_CFLAGS=""
     INIH_LIBS="-linih"])
  tri_save_CPPFLAGS="$CPPFLAGS"
  tri_save_LIBS="$LIBS"
  CPPFLAGS="$CPPFLAGS $INIH_CFLAGS"
  LIBS="$INIH_LIBS $LIBS"
  AC_CHECK_HEADER([ini.h], [],
    [AC_MSG_ERROR([ini.h not found. Install libinih (Debian: libinih-dev)])])
  AC_MSG_CHECKING([for ini_parse_string in $INIH_LIBS])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <ini.h>]], [[return ini_parse_string("", 0, 0);]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([libinih does not link. Install libinih (Debian: libinih-dev)])])
  CPPFLAGS="$tri_save_CPPFLAGS"
  LIBS="$tri_save_LIBS"
  AC_SUBST([INIH_CFLAGS])
  AC_SUBST([INIH_LIBS])
])
