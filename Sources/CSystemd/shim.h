// libsystemd for Swift: sd_notify, socket activation, the watchdog and the native journal protocol.
// Only non-variadic calls are used from Swift (sd_journal_sendv, not sd_journal_send).
#ifndef HALFTUNES_CSYSTEMD_SHIM_H
#define HALFTUNES_CSYSTEMD_SHIM_H
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
// Not libsystemd, but also missing from Swift's Glibc module: setxattr(2) for POSIX ACLs on per-user
// download directories.
#include <sys/xattr.h>
#endif
