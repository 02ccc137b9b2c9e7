// Linux file calls that Glibc exports to Swift only with _GNU_SOURCE: wrapped here for HalfTunesEngine.
#ifndef HALFTUNES_CLINUXFILE_H
#define HALFTUNES_CLINUXFILE_H

#ifdef __linux__
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stddef.h>

/// Starts the writeback of the range's dirty pages without waiting for it (SYNC_FILE_RANGE_WRITE). Makes
/// nothing durable. Returns 0, or -1 with errno set.
static inline int htd_start_writeback(int fd, long long offset, long long count) {
    return sync_file_range(fd, (off_t)offset, (off_t)count, SYNC_FILE_RANGE_WRITE);
}

/// Reserves the blocks of the range without changing the file's size (fallocate with FALLOC_FL_KEEP_SIZE), so
/// later writes into it cannot run out of space. Returns 0, or -1 with errno set (EOPNOTSUPP where the
/// filesystem cannot do it).
static inline int htd_preallocate(int fd, long long offset, long long count) {
    return fallocate(fd, 0x01 /* FALLOC_FL_KEEP_SIZE */, (off_t)offset, (off_t)count);
}

/// Gives back the blocks of the range without changing the file's size (fallocate with FALLOC_FL_PUNCH_HOLE |
/// FALLOC_FL_KEEP_SIZE): what was reserved and never written. Returns 0, or -1 with errno set.
static inline int htd_punch_hole(int fd, long long offset, long long count) {
    return fallocate(fd, 0x01 | 0x02 /* FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE */, (off_t)offset, (off_t)count);
}

/// Sets a user extended attribute on an open file (fsetxattr(2)): never by path, so nothing a user planted at
/// the path (a symlink, another file) is touched. Returns 0, or -1 with errno set (ENOTSUP where the file system
/// has no user xattrs). In CLinuxFile.c: <sys/stat.h> and <time.h> here would clash with other C modules' view of
/// the same system headers.
int htd_fset_xattr(int fd, const char *name, const void *value, size_t size);

/// Reads a user extended attribute (getxattr(2)): its length, or -1 with errno set (ENODATA when absent).
long htd_get_xattr(const char *path, const char *name, void *value, size_t size);

/// Sets an open file's modification time, and its access time to now (futimens(2) with UTIME_NOW). Returns 0,
/// or -1 with errno set.
int htd_fset_mtime(int fd, long long seconds, long nanoseconds);

/// Links the open file `fd` (itself, whatever its path names now) at `name` in `dirfd`, without replacing
/// anything there (linkat(2) of /proc/self/fd/N with AT_SYMLINK_FOLLOW, which needs no privilege). Returns 0,
/// or -1 with errno set (EEXIST when the name is taken; ENOENT when /proc is not mounted).
int htd_link_open_file(int fd, int dirfd, const char *name);
#endif

#endif
