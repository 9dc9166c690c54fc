/*
 * file_check.c - opening user-named files without blocking; see
 * file_check.h.
 */
#include "file_check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *file_kind(mode_t mode)
{
    if (S_ISREG(mode))
        return "a regular file";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISLNK(mode))
        return "a symbolic link";
    return "not a file of a known kind";
}

/* why = "<kind>, not a regular file" or strerror(EISDIR) for a directory. */
static void not_regular(mode_t mode, char *why, size_t why_size)
{
    if (S_ISDIR(mode))
        snprintf(why, why_size, "%s", strerror(EISDIR));
    else
        snprintf(why, why_size, "%s, not a regular file", file_kind(mode));
}

int file_open_regular(const char *path, int flags, char *why, size_t why_size)
{
    int fd = open(path, flags | O_NONBLOCK | O_CLOEXEC, 0666);
    if (fd < 0) {
        /* a FIFO opened for writing with no reader: ENXIO, "No such device
         * or address", which would not say what is wrong */
        int e = errno;
        struct stat st;
        if (e == ENXIO && stat(path, &st) == 0 && !S_ISREG(st.st_mode))
            not_regular(st.st_mode, why, why_size);
        else
            snprintf(why, why_size, "%s", strerror(e));
        errno = e;
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        snprintf(why, why_size, "%s", strerror(e));
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        not_regular(st.st_mode, why, why_size);
        close(fd);
        errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl != -1)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int file_is_special(const char *path, char *why, size_t why_size)
{
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode))
        return 0;
    snprintf(why, why_size, "%s, not a regular file", file_kind(st.st_mode));
    return 1;
}

int file_make_parents(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return errno;
        *p = '/';
    }
    if (dir[0] && mkdir(dir, 0777) != 0 && errno != EEXIST)
        return errno;
    return 0;
}
