// HalfTunesEngine: HTTP transfers into partial files and memory (AsyncHTTPClient), carrying out what HalfTunesCore decides.
