// HalfTunesCore: what tasks and transfers decide (lifecycle, resumption, retries, proxies, authentication), as values with no I/O, NIO or HTTP client.
