// The static inline calls are in include/CLinuxFile.h; the ones that need <sys/stat.h> and <time.h> are here,
// so the header does not pull those into the modules that import it.
#include "CLinuxFile.h"

#ifdef __linux__
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>

int htd_set_xattr(const char *path, const char *name, const void *value, size_t size) {
    return setxattr(path, name, value, size, 0);
}

long htd_get_xattr(const char *path, const char *name, void *value, size_t size) {
    return (long)getxattr(path, name, value, size);
}

int htd_set_mtime(const char *path, long long seconds, long nanoseconds) {
    struct timespec times[2] = {{0, UTIME_NOW}, {(time_t)seconds, nanoseconds}};
    return utimensat(AT_FDCWD, path, times, 0);
}
#endif
