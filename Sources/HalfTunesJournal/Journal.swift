// HalfTunesJournal: the crash-safe SQLite journal of sessions, tasks, events and resume tokens.
