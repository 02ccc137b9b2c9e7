// The static inline calls are in include/CLinuxFile.h; the ones that need <sys/stat.h> and <time.h> are here,
// so the header does not pull those into the modules that import it.
#include "CLinuxFile.h"

#ifdef __linux__
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int htd_fset_xattr(int fd, const char *name, const void *value, size_t size) {
    return fsetxattr(fd, name, value, size, 0);
}

long htd_get_xattr(const char *path, const char *name, void *value, size_t size) {
    return (long)getxattr(path, name, value, size);
}

int htd_fset_mtime(int fd, long long seconds, long nanoseconds) {
    struct timespec times[2] = {{0, UTIME_NOW}, {(time_t)seconds, nanoseconds}};
    return futimens(fd, times);
}

int htd_link_open_file(int fd, int dirfd, const char *name) {
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, proc, dirfd, name, AT_SYMLINK_FOLLOW);
}
#endif
