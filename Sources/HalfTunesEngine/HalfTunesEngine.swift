// HalfTunesEngine: the task lifecycle state machine and HTTP transfers into partial files.
