// The fatal-signal handler of the crash record: async-signal-safe calls only (write, sigaction, raise).
#include "CCrashRecord.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int crash_fd = -1;
static char boot_id[64];
static volatile int64_t slots[HTD_CRASH_SLOTS];
static volatile int used = 0; // slots at and past this index are free
static const int fatal_signals[] = { SIGILL, SIGTRAP, SIGFPE, SIGBUS, SIGSEGV, SIGABRT };
#define FATAL_COUNT (int)(sizeof(fatal_signals) / sizeof(fatal_signals[0]))
static struct sigaction previous[FATAL_COUNT];

struct line { char bytes[4096]; size_t length; };

static void flush(struct line *l) {
    size_t done = 0;
    while (done < l->length) {
        ssize_t n = write(crash_fd, l->bytes + done, l->length - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += (size_t)n;
    }
    l->length = 0;
}

static void append(struct line *l, const char *text, size_t length) {
    if (l->length + length > sizeof(l->bytes)) flush(l);
    memcpy(l->bytes + l->length, text, length);
    l->length += length;
}

static void append_number(struct line *l, int64_t value) {
    char digits[24];
    int n = 0;
    uint64_t v = value < 0 ? 0 : (uint64_t)value;
    do { digits[n++] = (char)('0' + v % 10); v /= 10; } while (v > 0 && n < 24);
    char text[24];
    for (int i = 0; i < n; i++) text[i] = digits[n - 1 - i];
    append(l, text, (size_t)n);
}

static void handler(int sig, siginfo_t *info, void *context) {
    (void)context;
    int saved = errno;
    if (crash_fd >= 0) {
        struct line l = { .length = 0 };
        append_number(&l, sig);
        append(&l, " ", 1);
        append(&l, boot_id, strlen(boot_id));
        int count = used;
        for (int i = 0; i < count && i < HTD_CRASH_SLOTS; i++) {
            int64_t id = slots[i];
            if (id <= 0) continue;
            append(&l, " ", 1);
            append_number(&l, id);
        }
        append(&l, "\n", 1);
        flush(&l);
        crash_fd = -1; // one line, even if another thread faults meanwhile
    }
    for (int i = 0; i < FATAL_COUNT; i++) {
        if (fatal_signals[i] == sig) sigaction(sig, &previous[i], NULL);
    }
    errno = saved;
    // A fault the kernel raised (si_code > 0) happens again when the handler returns, now to the handler before
    // ours; a signal sent (abort, raise, kill) is sent again, delivered once this handler returns.
    if (info == NULL || info->si_code <= 0) raise(sig);
}

int htd_crash_install(int fd, const char *bootID) {
    crash_fd = fd;
    size_t n = bootID ? strlen(bootID) : 0;
    if (n > sizeof(boot_id) - 1) n = sizeof(boot_id) - 1;
    for (size_t i = 0; i < n; i++) boot_id[i] = (bootID[i] > ' ' && bootID[i] < 127) ? bootID[i] : '_';
    boot_id[n] = 0;
    if (n == 0) { boot_id[0] = '-'; boot_id[1] = 0; }
    // A stack overflow's SIGSEGV needs a stack of its own (for the thread that installs it: the main thread).
    static char alternate[64 * 1024];
    stack_t stack = { .ss_sp = alternate, .ss_size = sizeof(alternate), .ss_flags = 0 };
    sigaltstack(&stack, NULL);
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_sigaction = handler;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    for (int i = 0; i < FATAL_COUNT; i++) {
        if (sigaction(fatal_signals[i], &action, &previous[i]) != 0) return errno;
    }
    return 0;
}

void htd_crash_set(int slot, int64_t taskID) {
    if (slot < 0 || slot >= HTD_CRASH_SLOTS) return;
    slots[slot] = taskID;
    if (taskID > 0 && slot >= used) used = slot + 1;
}
