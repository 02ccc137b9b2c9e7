// libFuzzer's driver entry (compiler-rt, linked by -sanitize=fuzzer). The harnesses call it from their own top-level
// code: SwiftPM links every executable with `--defsym main=<Target>_main`, so libFuzzer's `main` cannot be used.
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
