// Header-only: LLVMFuzzerRunDriver comes from libFuzzer (-sanitize=fuzzer at link time).
