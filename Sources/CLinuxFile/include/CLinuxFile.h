// Linux file calls that Glibc exports to Swift only with _GNU_SOURCE: wrapped here for HalfTunesEngine.
#ifndef HALFTUNES_CLINUXFILE_H
#define HALFTUNES_CLINUXFILE_H

#ifdef __linux__
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>

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
#endif

#endif
