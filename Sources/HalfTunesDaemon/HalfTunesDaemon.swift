// HalfTunesDaemon: sessions, the queue, event fan-out and the JSON-RPC control server.
