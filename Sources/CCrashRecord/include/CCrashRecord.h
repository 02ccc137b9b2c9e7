// The daemon's record of a fatal signal: which tasks were running when it trapped, written by a signal handler.
#ifndef HALFTUNES_CCRASHRECORD_H
#define HALFTUNES_CCRASHRECORD_H

#include <stdint.h>

/// Slots for the ids of running tasks; more at once are not recorded (the daemon runs at most 1,000 transfers).
#define HTD_CRASH_SLOTS 4096

/// Makes `fd` (opened for appending) the crash record and installs the handler for SIGILL, SIGTRAP, SIGFPE, SIGBUS,
/// SIGSEGV and SIGABRT (the ways a process stops itself: a Swift trap, a fault, abort), with an alternate stack for
/// the calling thread. The handler appends one line, "<signal> <bootID> <id> <id> ...\n", with write(2) only, puts
/// back the handler that was there before (Swift's backtracer, or the default) and lets the signal go on to it, so
/// the process still dies of it. `bootID` is copied (at most 63 bytes). Returns 0, or an errno value.
int htd_crash_install(int fd, const char *bootID);

/// Sets slot `slot` (0 ..< HTD_CRASH_SLOTS) to a running task's id, or to 0 when it is free again.
void htd_crash_set(int slot, int64_t taskID);

#endif
