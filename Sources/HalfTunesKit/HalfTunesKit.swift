// HalfTunesKit: the client library for halftunesd, shaped after URLSession's background API.
