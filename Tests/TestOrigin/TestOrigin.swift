// TestOrigin: an HTTP origin on 127.0.0.1 for tests, with Range/ETag and faults on demand.
