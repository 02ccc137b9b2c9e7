import GRDB

/// The journal's schema as an ordered list of GRDB migrations. A migration, once shipped, is never edited:
/// changes go in a new migration appended to `migrations` ("v2", "v3", ...). See docs/journal.md.
enum JournalSchema {
    static let migrations: [(identifier: String, sql: String)] = [
        ("v1", v1),
        ("v2", v2),
        ("v3", v3),
        ("v4", v4),
        ("v5", v5),
        ("v6", v6),
        ("v7", v7),
        ("v8", v8),
        ("v9", v9),
        ("v10", v10),
        ("v11", v11),
        ("v12", v12),
        ("v13", v13),
        ("v14", v14),
        ("v15", v15),
        ("v16", v16),
        ("v17", v17),
        ("v18", v18),
    ]

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for migration in migrations {
            migrator.registerMigration(migration.identifier) { db in
                try db.execute(sql: migration.sql)
            }
        }
        return migrator
    }

    static let v1 = """
        CREATE TABLE sessions (
            identifier      TEXT PRIMARY KEY NOT NULL,
            uid             INTEGER NOT NULL,
            configuration   TEXT NOT NULL,
            state           TEXT NOT NULL,
            created_at      REAL NOT NULL,
            acked_through   INTEGER NOT NULL DEFAULT 0,
            last_event_seq  INTEGER NOT NULL DEFAULT 0
        );

        CREATE TABLE tasks (
            id                  INTEGER PRIMARY KEY AUTOINCREMENT,
            session             TEXT NOT NULL REFERENCES sessions(identifier) ON DELETE CASCADE,
            kind                TEXT NOT NULL,
            url                 TEXT NOT NULL,
            current_url         TEXT,
            state               TEXT NOT NULL,
            phase               TEXT NOT NULL DEFAULT 'transfer',
            waiting_reason      TEXT,
            next_attempt_at     REAL,
            destination         TEXT NOT NULL,
            location            TEXT,
            partial_path        TEXT NOT NULL,
            headers             TEXT NOT NULL DEFAULT '{}',
            description         TEXT,
            bytes_durable       INTEGER NOT NULL DEFAULT 0,
            bytes_expected      INTEGER,
            etag                TEXT,
            last_modified       TEXT,
            error               TEXT,
            attempts            INTEGER NOT NULL DEFAULT 0,
            queue_order         INTEGER NOT NULL DEFAULT 0,
            created_at          REAL NOT NULL,
            updated_at          REAL NOT NULL,
            resource_deadline   REAL
        );
        CREATE INDEX tasks_by_session ON tasks(session);

        CREATE TABLE events (
            seq         INTEGER PRIMARY KEY AUTOINCREMENT,
            session     TEXT NOT NULL REFERENCES sessions(identifier) ON DELETE CASCADE,
            task        INTEGER REFERENCES tasks(id) ON DELETE CASCADE,
            type        TEXT NOT NULL,
            created_at  REAL NOT NULL,
            json        TEXT NOT NULL
        );
        CREATE INDEX events_by_session ON events(session, seq);
        CREATE INDEX events_by_task ON events(task);

        CREATE TABLE resume_tokens (
            token           TEXT PRIMARY KEY NOT NULL,
            session         TEXT NOT NULL REFERENCES sessions(identifier) ON DELETE CASCADE,
            url             TEXT NOT NULL,
            partial_path    TEXT NOT NULL,
            destination     TEXT NOT NULL,
            bytes           INTEGER NOT NULL,
            bytes_expected  INTEGER,
            etag            TEXT,
            last_modified   TEXT,
            created_at      REAL NOT NULL
        );
        CREATE INDEX resume_tokens_by_created_at ON resume_tokens(created_at);
        CREATE INDEX resume_tokens_by_session ON resume_tokens(session);
        """

    /// Issue 4: task kinds (upload, data), priorities, checksums, per-task bandwidth limits, responses,
    /// and daemon settings changed at runtime (`daemon.setLimits`).
    static let v2 = """
        ALTER TABLE tasks ADD COLUMN priority TEXT NOT NULL DEFAULT 'normal';
        ALTER TABLE tasks ADD COLUMN checksum TEXT;
        ALTER TABLE tasks ADD COLUMN bandwidth_limit INTEGER;
        ALTER TABLE tasks ADD COLUMN method TEXT;
        ALTER TABLE tasks ADD COLUMN file TEXT;
        ALTER TABLE tasks ADD COLUMN max_response_bytes INTEGER;
        ALTER TABLE tasks ADD COLUMN response TEXT;
        CREATE TABLE settings (
            key TEXT PRIMARY KEY NOT NULL,
            value TEXT NOT NULL
        ) WITHOUT ROWID;
        """

    /// Issue 5: sessions belong to their uid. Identifiers are stored qualified by the owner's uid
    /// ("1000/com.example.app"), in every table, so two users' sessions of the same name never meet.
    /// Children first, while the old names still find their session; foreign keys are checked at the end.
    static let v3 = """
        UPDATE tasks SET session = (SELECT uid FROM sessions WHERE identifier = tasks.session) || '/' || session
            WHERE instr(session, '/') = 0;
        UPDATE events SET session = (SELECT uid FROM sessions WHERE identifier = events.session) || '/' || session
            WHERE instr(session, '/') = 0;
        UPDATE resume_tokens SET session = (SELECT uid FROM sessions WHERE identifier = resume_tokens.session) || '/' || session
            WHERE instr(session, '/') = 0;
        UPDATE sessions SET identifier = uid || '/' || identifier WHERE instr(identifier, '/') = 0;
        """

    /// Issue 5: an upload is pinned to the file its client was allowed to read at creation
    /// ("<device>:<inode>"); every attempt must open that same file.
    static let v4 = """
        ALTER TABLE tasks ADD COLUMN file_id TEXT;
        """

    /// A download may replace an existing file at its destination (`task.create` `overwrite`).
    static let v5 = """
        ALTER TABLE tasks ADD COLUMN overwrite INTEGER NOT NULL DEFAULT 0;
        """

    /// Issue 12: a download's durable data may be several ranges (one per segment). NULL is the range
    /// `0..<bytes_durable` (every row before, and every download written in order); otherwise the ranges'
    /// text form ("0-1048576,4194304-5242880", ends exclusive), and `bytes_durable` is their sum.
    static let v6 = """
        ALTER TABLE tasks ADD COLUMN durable_ranges TEXT;
        ALTER TABLE resume_tokens ADD COLUMN ranges TEXT;
        """

    /// Issue 12: a download's own most connections (`task.create` `maxConnections`; NULL: the session's).
    static let v7 = """
        ALTER TABLE tasks ADD COLUMN max_connections INTEGER;
        """

    /// Issue 13: a task does not start before this time (seconds since 1970; NULL: at once).
    static let v8 = """
        ALTER TABLE tasks ADD COLUMN earliest_begin_date REAL;
        """

    /// Issue 13: how starting a session's `launchUnit` went (JSON `SessionLaunchRecord`; NULL: never started).
    static let v9 = """
        ALTER TABLE sessions ADD COLUMN launch TEXT;
        """

    /// Issue 15: the first response may name a download the client named no file for; the name it suggested.
    static let v10 = """
        ALTER TABLE tasks ADD COLUMN name_from_response INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE tasks ADD COLUMN suggested_filename TEXT;
        """

    /// Issue 27: bounded growth. How many finished tasks each session has, per state, kept by triggers (a
    /// restart reads this table instead of counting finished rows); a partial index of the rows a restart loads
    /// (unfinished, or being published), and one of the finished rows by session and finish time, which the
    /// retention sweep deletes once their events are acknowledged (`Journal.deleteFinishedTasks`).
    static let v11 = """
        CREATE TABLE finished_counts (
            session TEXT NOT NULL REFERENCES sessions(identifier) ON DELETE CASCADE,
            state   TEXT NOT NULL,
            count   INTEGER NOT NULL,
            PRIMARY KEY (session, state)
        ) WITHOUT ROWID;
        INSERT INTO finished_counts (session, state, count)
            SELECT session, state, COUNT(*) FROM tasks
            WHERE state IN ('completed', 'failed', 'canceled') AND phase != 'publishing'
            GROUP BY session, state;
        CREATE TRIGGER finished_counts_insert AFTER INSERT ON tasks
            WHEN NEW.state IN ('completed', 'failed', 'canceled') AND NEW.phase != 'publishing'
        BEGIN
            INSERT INTO finished_counts (session, state, count) VALUES (NEW.session, NEW.state, 1)
                ON CONFLICT (session, state) DO UPDATE SET count = count + 1;
        END;
        CREATE TRIGGER finished_counts_delete AFTER DELETE ON tasks
            WHEN OLD.state IN ('completed', 'failed', 'canceled') AND OLD.phase != 'publishing'
        BEGIN
            UPDATE finished_counts SET count = count - 1 WHERE session = OLD.session AND state = OLD.state;
        END;
        CREATE TRIGGER finished_counts_update_old AFTER UPDATE OF session, state, phase ON tasks
            WHEN OLD.state IN ('completed', 'failed', 'canceled') AND OLD.phase != 'publishing'
        BEGIN
            UPDATE finished_counts SET count = count - 1 WHERE session = OLD.session AND state = OLD.state;
        END;
        CREATE TRIGGER finished_counts_update_new AFTER UPDATE OF session, state, phase ON tasks
            WHEN NEW.state IN ('completed', 'failed', 'canceled') AND NEW.phase != 'publishing'
        BEGIN
            INSERT INTO finished_counts (session, state, count) VALUES (NEW.session, NEW.state, 1)
                ON CONFLICT (session, state) DO UPDATE SET count = count + 1;
        END;
        CREATE INDEX tasks_loaded ON tasks(id)
            WHERE state NOT IN ('completed', 'failed', 'canceled') OR phase = 'publishing';
        CREATE INDEX tasks_finished ON tasks(session, updated_at)
            WHERE state IN ('completed', 'failed', 'canceled');
        """

    /// Issue 29: a task's own credentials (given with it, or taken out of its URL's userinfo), JSON
    /// `{"user":…,"password":…}`; NULL: the session's, if any.
    static let v12 = """
        ALTER TABLE tasks ADD COLUMN credentials TEXT;
        """

    /// Issue 28: `task.list` with a state reads one index range (of every session: root; or of one session), not
    /// every row after the cursor (or every row of the session) testing each one's state.
    static let v13 = """
        CREATE INDEX tasks_by_state ON tasks(state);
        CREATE INDEX tasks_by_session_state ON tasks(session, state);
        """

    /// Issue 28: v11's partial indexes and triggers test "finished" with comparisons instead of `IN` lists. SQLite
    /// evaluates an `IN` list of three or more values through a temporary b-tree built for each run of the
    /// statement: every row update built six (the two indexes' conditions for the old and the new row, the two
    /// triggers' `WHEN`), every insert three — ~4 % of the daemon's samples under control-plane load. Same rows,
    /// same counts; the queries that use the indexes say "finished" the same way (`Journal.isFinished`,
    /// `Journal.loadedRows`), as a partial index requires.
    static let v14 = """
        DROP TRIGGER finished_counts_insert;
        DROP TRIGGER finished_counts_delete;
        DROP TRIGGER finished_counts_update_old;
        DROP TRIGGER finished_counts_update_new;
        CREATE TRIGGER finished_counts_insert AFTER INSERT ON tasks
            WHEN (NEW.state = 'completed' OR NEW.state = 'failed' OR NEW.state = 'canceled') AND NEW.phase != 'publishing'
        BEGIN
            INSERT INTO finished_counts (session, state, count) VALUES (NEW.session, NEW.state, 1)
                ON CONFLICT (session, state) DO UPDATE SET count = count + 1;
        END;
        CREATE TRIGGER finished_counts_delete AFTER DELETE ON tasks
            WHEN (OLD.state = 'completed' OR OLD.state = 'failed' OR OLD.state = 'canceled') AND OLD.phase != 'publishing'
        BEGIN
            UPDATE finished_counts SET count = count - 1 WHERE session = OLD.session AND state = OLD.state;
        END;
        CREATE TRIGGER finished_counts_update_old AFTER UPDATE OF session, state, phase ON tasks
            WHEN (OLD.state = 'completed' OR OLD.state = 'failed' OR OLD.state = 'canceled') AND OLD.phase != 'publishing'
        BEGIN
            UPDATE finished_counts SET count = count - 1 WHERE session = OLD.session AND state = OLD.state;
        END;
        CREATE TRIGGER finished_counts_update_new AFTER UPDATE OF session, state, phase ON tasks
            WHEN (NEW.state = 'completed' OR NEW.state = 'failed' OR NEW.state = 'canceled') AND NEW.phase != 'publishing'
        BEGIN
            INSERT INTO finished_counts (session, state, count) VALUES (NEW.session, NEW.state, 1)
                ON CONFLICT (session, state) DO UPDATE SET count = count + 1;
        END;
        DROP INDEX tasks_loaded;
        CREATE INDEX tasks_loaded ON tasks(id)
            WHERE (state <> 'completed' AND state <> 'failed' AND state <> 'canceled') OR phase = 'publishing';
        DROP INDEX tasks_finished;
        CREATE INDEX tasks_finished ON tasks(session, updated_at)
            WHERE (state = 'completed' OR state = 'failed' OR state = 'canceled');
        """

    /// Issue 54: a session's credentials name the origin they are for (`[{origin, realm?, user, password}]`). The
    /// single `{user, password}` of a session journaled before becomes one entry without an origin: kept, shown,
    /// sent nowhere until the session is opened again with an origin.
    static let v15 = """
        UPDATE sessions
            SET configuration = json_set(configuration, '$.credentials',
                                         json_array(json(json_extract(configuration, '$.credentials'))))
            WHERE json_type(configuration, '$.credentials') = 'object';
        """

    /// Issue 54: what the journal holds for each session, in bytes (its configuration, its events' JSON, its tasks'
    /// text columns: a data task's body, a server's headers, errors; UTF-8 bytes, not characters), kept by triggers so a uid's total is one small read
    /// (`Journal.journaledBytes(uid:)`, for `max-journal-per-uid`). A checkpoint's narrow update fires none.
    static let v16 = """
        CREATE TABLE session_bytes (
            session TEXT PRIMARY KEY NOT NULL,
            bytes   INTEGER NOT NULL
        ) WITHOUT ROWID;
        INSERT INTO session_bytes (session, bytes)
            SELECT session, SUM(b) FROM (
                SELECT identifier AS session, length(CAST(configuration AS BLOB)) AS b FROM sessions
                UNION ALL
                SELECT session, length(CAST(json AS BLOB)) AS b FROM events
                UNION ALL
                SELECT t.session, length(CAST(t.url AS BLOB)) + length(CAST(t.destination AS BLOB)) + length(CAST(t.partial_path AS BLOB)) + ifnull(length(CAST(t.current_url AS BLOB)), 0) + ifnull(length(CAST(t.location AS BLOB)), 0) + ifnull(length(CAST(t.headers AS BLOB)), 0) + ifnull(length(CAST(t.description AS BLOB)), 0) + ifnull(length(CAST(t.response AS BLOB)), 0) + ifnull(length(CAST(t.error AS BLOB)), 0) + ifnull(length(CAST(t.waiting_reason AS BLOB)), 0) + ifnull(length(CAST(t.file AS BLOB)), 0) + ifnull(length(CAST(t.suggested_filename AS BLOB)), 0) + ifnull(length(CAST(t.credentials AS BLOB)), 0) AS b FROM tasks t
            ) GROUP BY session;
        CREATE TRIGGER session_bytes_session_insert AFTER INSERT ON sessions
        BEGIN
            INSERT INTO session_bytes (session, bytes) VALUES (NEW.identifier, length(CAST(NEW.configuration AS BLOB)))
                ON CONFLICT (session) DO UPDATE SET bytes = bytes + excluded.bytes;
        END;
        CREATE TRIGGER session_bytes_session_update AFTER UPDATE OF configuration ON sessions
        BEGIN
            UPDATE session_bytes SET bytes = bytes - length(CAST(OLD.configuration AS BLOB))
                + length(CAST(NEW.configuration AS BLOB)) WHERE session = NEW.identifier;
        END;
        CREATE TRIGGER session_bytes_session_delete AFTER DELETE ON sessions
        BEGIN
            DELETE FROM session_bytes WHERE session = OLD.identifier;
        END;
        CREATE TRIGGER session_bytes_event_insert AFTER INSERT ON events
        BEGIN
            INSERT INTO session_bytes (session, bytes) VALUES (NEW.session, length(CAST(NEW.json AS BLOB)))
                ON CONFLICT (session) DO UPDATE SET bytes = bytes + excluded.bytes;
        END;
        CREATE TRIGGER session_bytes_event_delete AFTER DELETE ON events
        BEGIN
            UPDATE session_bytes SET bytes = bytes - length(CAST(OLD.json AS BLOB)) WHERE session = OLD.session;
        END;
        CREATE TRIGGER session_bytes_task_insert AFTER INSERT ON tasks
        BEGIN
            INSERT INTO session_bytes (session, bytes) VALUES (NEW.session, length(CAST(NEW.url AS BLOB)) + length(CAST(NEW.destination AS BLOB)) + length(CAST(NEW.partial_path AS BLOB)) + ifnull(length(CAST(NEW.current_url AS BLOB)), 0) + ifnull(length(CAST(NEW.location AS BLOB)), 0) + ifnull(length(CAST(NEW.headers AS BLOB)), 0) + ifnull(length(CAST(NEW.description AS BLOB)), 0) + ifnull(length(CAST(NEW.response AS BLOB)), 0) + ifnull(length(CAST(NEW.error AS BLOB)), 0) + ifnull(length(CAST(NEW.waiting_reason AS BLOB)), 0) + ifnull(length(CAST(NEW.file AS BLOB)), 0) + ifnull(length(CAST(NEW.suggested_filename AS BLOB)), 0) + ifnull(length(CAST(NEW.credentials AS BLOB)), 0))
                ON CONFLICT (session) DO UPDATE SET bytes = bytes + excluded.bytes;
        END;
        CREATE TRIGGER session_bytes_task_delete AFTER DELETE ON tasks
        BEGIN
            UPDATE session_bytes SET bytes = bytes - (length(CAST(OLD.url AS BLOB)) + length(CAST(OLD.destination AS BLOB)) + length(CAST(OLD.partial_path AS BLOB)) + ifnull(length(CAST(OLD.current_url AS BLOB)), 0) + ifnull(length(CAST(OLD.location AS BLOB)), 0) + ifnull(length(CAST(OLD.headers AS BLOB)), 0) + ifnull(length(CAST(OLD.description AS BLOB)), 0) + ifnull(length(CAST(OLD.response AS BLOB)), 0) + ifnull(length(CAST(OLD.error AS BLOB)), 0) + ifnull(length(CAST(OLD.waiting_reason AS BLOB)), 0) + ifnull(length(CAST(OLD.file AS BLOB)), 0) + ifnull(length(CAST(OLD.suggested_filename AS BLOB)), 0) + ifnull(length(CAST(OLD.credentials AS BLOB)), 0)) WHERE session = OLD.session;
        END;
        CREATE TRIGGER session_bytes_task_update AFTER UPDATE OF url, destination, partial_path, current_url, location,
            headers, description, response, error, waiting_reason, file, suggested_filename, credentials ON tasks
        BEGIN
            UPDATE session_bytes SET bytes = bytes - (length(CAST(OLD.url AS BLOB)) + length(CAST(OLD.destination AS BLOB)) + length(CAST(OLD.partial_path AS BLOB)) + ifnull(length(CAST(OLD.current_url AS BLOB)), 0) + ifnull(length(CAST(OLD.location AS BLOB)), 0) + ifnull(length(CAST(OLD.headers AS BLOB)), 0) + ifnull(length(CAST(OLD.description AS BLOB)), 0) + ifnull(length(CAST(OLD.response AS BLOB)), 0) + ifnull(length(CAST(OLD.error AS BLOB)), 0) + ifnull(length(CAST(OLD.waiting_reason AS BLOB)), 0) + ifnull(length(CAST(OLD.file AS BLOB)), 0) + ifnull(length(CAST(OLD.suggested_filename AS BLOB)), 0) + ifnull(length(CAST(OLD.credentials AS BLOB)), 0)) WHERE session = OLD.session;
            INSERT INTO session_bytes (session, bytes) VALUES (NEW.session, length(CAST(NEW.url AS BLOB)) + length(CAST(NEW.destination AS BLOB)) + length(CAST(NEW.partial_path AS BLOB)) + ifnull(length(CAST(NEW.current_url AS BLOB)), 0) + ifnull(length(CAST(NEW.location AS BLOB)), 0) + ifnull(length(CAST(NEW.headers AS BLOB)), 0) + ifnull(length(CAST(NEW.description AS BLOB)), 0) + ifnull(length(CAST(NEW.response AS BLOB)), 0) + ifnull(length(CAST(NEW.error AS BLOB)), 0) + ifnull(length(CAST(NEW.waiting_reason AS BLOB)), 0) + ifnull(length(CAST(NEW.file AS BLOB)), 0) + ifnull(length(CAST(NEW.suggested_filename AS BLOB)), 0) + ifnull(length(CAST(NEW.credentials AS BLOB)), 0))
                ON CONFLICT (session) DO UPDATE SET bytes = bytes + excluded.bytes;
        END;
        """

    /// Issue 55: a state change of one task writes fewer pages. Events are numbered by the journal's writer, so
    /// their table loses `AUTOINCREMENT` (its `sqlite_sequence` row was one more page per event); what keeps seqs
    /// from being used again is each session's `last_event_seq` and, for deleted sessions, `event_seq_floor`. A
    /// session's journaled bytes move into its row (`journaled_bytes`), and the event trigger that counts them also
    /// advances `last_event_seq`: one page for both, where there were two tables and a statement. The restart's
    /// index covers the rows with `loaded = 1`, a column only the state triggers write, on the changes that move a
    /// row in or out (finished, publishing): no other update touches that index.
    static let v17 = """
        CREATE TABLE event_seq_floor (seq INTEGER NOT NULL);
        INSERT INTO event_seq_floor (seq) VALUES ((SELECT ifnull(max(seq), 0) FROM sqlite_sequence WHERE name = 'events'));
        CREATE TABLE events_v17 (
            seq         INTEGER PRIMARY KEY,
            session     TEXT NOT NULL REFERENCES sessions(identifier) ON DELETE CASCADE,
            task        INTEGER REFERENCES tasks(id) ON DELETE CASCADE,
            type        TEXT NOT NULL,
            created_at  REAL NOT NULL,
            json        TEXT NOT NULL
        );
        INSERT INTO events_v17 (seq, session, task, type, created_at, json)
            SELECT seq, session, task, type, created_at, json FROM events;
        DROP TABLE events;
        ALTER TABLE events_v17 RENAME TO events;
        CREATE INDEX events_by_session ON events(session, seq);
        CREATE INDEX events_by_task ON events(task);

        ALTER TABLE sessions ADD COLUMN journaled_bytes INTEGER NOT NULL DEFAULT 0;
        UPDATE sessions SET journaled_bytes = ifnull((SELECT bytes FROM session_bytes WHERE session = identifier), 0);
        DROP TRIGGER session_bytes_session_insert;
        DROP TRIGGER session_bytes_session_update;
        DROP TRIGGER session_bytes_session_delete;
        DROP TRIGGER session_bytes_task_insert;
        DROP TRIGGER session_bytes_task_delete;
        DROP TRIGGER session_bytes_task_update;
        DROP TABLE session_bytes;
        CREATE TRIGGER journaled_bytes_session_insert AFTER INSERT ON sessions
        BEGIN
            UPDATE sessions SET journaled_bytes = length(CAST(NEW.configuration AS BLOB)) WHERE identifier = NEW.identifier;
        END;
        CREATE TRIGGER journaled_bytes_session_update AFTER UPDATE OF configuration ON sessions
        BEGIN
            UPDATE sessions SET journaled_bytes = journaled_bytes - length(CAST(OLD.configuration AS BLOB))
                + length(CAST(NEW.configuration AS BLOB)) WHERE identifier = NEW.identifier;
        END;
        CREATE TRIGGER event_seq_floor_session_delete AFTER DELETE ON sessions
        BEGIN
            UPDATE event_seq_floor SET seq = max(seq, OLD.last_event_seq);
        END;
        CREATE TRIGGER journaled_bytes_event_insert AFTER INSERT ON events
        BEGIN
            UPDATE sessions SET journaled_bytes = journaled_bytes + length(CAST(NEW.json AS BLOB)),
                last_event_seq = max(last_event_seq, NEW.seq) WHERE identifier = NEW.session;
        END;
        CREATE TRIGGER journaled_bytes_event_delete AFTER DELETE ON events
        BEGIN
            UPDATE sessions SET journaled_bytes = journaled_bytes - length(CAST(OLD.json AS BLOB)) WHERE identifier = OLD.session;
        END;
        CREATE TRIGGER journaled_bytes_task_insert AFTER INSERT ON tasks
        BEGIN
            UPDATE sessions SET journaled_bytes = journaled_bytes + (length(CAST(NEW.url AS BLOB)) + length(CAST(NEW.destination AS BLOB)) + length(CAST(NEW.partial_path AS BLOB)) + ifnull(length(CAST(NEW.current_url AS BLOB)), 0) + ifnull(length(CAST(NEW.location AS BLOB)), 0) + ifnull(length(CAST(NEW.headers AS BLOB)), 0) + ifnull(length(CAST(NEW.description AS BLOB)), 0) + ifnull(length(CAST(NEW.response AS BLOB)), 0) + ifnull(length(CAST(NEW.error AS BLOB)), 0) + ifnull(length(CAST(NEW.waiting_reason AS BLOB)), 0) + ifnull(length(CAST(NEW.file AS BLOB)), 0) + ifnull(length(CAST(NEW.suggested_filename AS BLOB)), 0) + ifnull(length(CAST(NEW.credentials AS BLOB)), 0)) WHERE identifier = NEW.session;
        END;
        CREATE TRIGGER journaled_bytes_task_delete AFTER DELETE ON tasks
        BEGIN
            UPDATE sessions SET journaled_bytes = journaled_bytes - (length(CAST(OLD.url AS BLOB)) + length(CAST(OLD.destination AS BLOB)) + length(CAST(OLD.partial_path AS BLOB)) + ifnull(length(CAST(OLD.current_url AS BLOB)), 0) + ifnull(length(CAST(OLD.location AS BLOB)), 0) + ifnull(length(CAST(OLD.headers AS BLOB)), 0) + ifnull(length(CAST(OLD.description AS BLOB)), 0) + ifnull(length(CAST(OLD.response AS BLOB)), 0) + ifnull(length(CAST(OLD.error AS BLOB)), 0) + ifnull(length(CAST(OLD.waiting_reason AS BLOB)), 0) + ifnull(length(CAST(OLD.file AS BLOB)), 0) + ifnull(length(CAST(OLD.suggested_filename AS BLOB)), 0) + ifnull(length(CAST(OLD.credentials AS BLOB)), 0)) WHERE identifier = OLD.session;
        END;
        CREATE TRIGGER journaled_bytes_task_update AFTER UPDATE OF url, destination, partial_path, current_url, location,
            headers, description, response, error, waiting_reason, file, suggested_filename, credentials ON tasks
        BEGIN
            UPDATE sessions SET journaled_bytes = journaled_bytes - (length(CAST(OLD.url AS BLOB)) + length(CAST(OLD.destination AS BLOB)) + length(CAST(OLD.partial_path AS BLOB)) + ifnull(length(CAST(OLD.current_url AS BLOB)), 0) + ifnull(length(CAST(OLD.location AS BLOB)), 0) + ifnull(length(CAST(OLD.headers AS BLOB)), 0) + ifnull(length(CAST(OLD.description AS BLOB)), 0) + ifnull(length(CAST(OLD.response AS BLOB)), 0) + ifnull(length(CAST(OLD.error AS BLOB)), 0) + ifnull(length(CAST(OLD.waiting_reason AS BLOB)), 0) + ifnull(length(CAST(OLD.file AS BLOB)), 0) + ifnull(length(CAST(OLD.suggested_filename AS BLOB)), 0) + ifnull(length(CAST(OLD.credentials AS BLOB)), 0)) + (length(CAST(NEW.url AS BLOB)) + length(CAST(NEW.destination AS BLOB)) + length(CAST(NEW.partial_path AS BLOB)) + ifnull(length(CAST(NEW.current_url AS BLOB)), 0) + ifnull(length(CAST(NEW.location AS BLOB)), 0) + ifnull(length(CAST(NEW.headers AS BLOB)), 0) + ifnull(length(CAST(NEW.description AS BLOB)), 0) + ifnull(length(CAST(NEW.response AS BLOB)), 0) + ifnull(length(CAST(NEW.error AS BLOB)), 0) + ifnull(length(CAST(NEW.waiting_reason AS BLOB)), 0) + ifnull(length(CAST(NEW.file AS BLOB)), 0) + ifnull(length(CAST(NEW.suggested_filename AS BLOB)), 0) + ifnull(length(CAST(NEW.credentials AS BLOB)), 0)) WHERE identifier = NEW.session;
        END;

        ALTER TABLE tasks ADD COLUMN loaded INTEGER NOT NULL DEFAULT 1;
        UPDATE tasks SET loaded = 0
            WHERE (state = 'completed' OR state = 'failed' OR state = 'canceled') AND phase != 'publishing';
        DROP INDEX tasks_loaded;
        CREATE INDEX tasks_loaded ON tasks(id) WHERE loaded = 1;
        CREATE TRIGGER tasks_loaded_insert AFTER INSERT ON tasks
            WHEN (NEW.state = 'completed' OR NEW.state = 'failed' OR NEW.state = 'canceled') AND NEW.phase != 'publishing'
        BEGIN
            UPDATE tasks SET loaded = 0 WHERE id = NEW.id;
        END;
        CREATE TRIGGER tasks_loaded_update AFTER UPDATE OF state, phase ON tasks
            WHEN NEW.loaded <> ((NEW.state <> 'completed' AND NEW.state <> 'failed' AND NEW.state <> 'canceled') OR NEW.phase = 'publishing')
        BEGIN
            UPDATE tasks SET loaded = ((NEW.state <> 'completed' AND NEW.state <> 'failed' AND NEW.state <> 'canceled')
                OR NEW.phase = 'publishing') WHERE id = NEW.id;
        END;
        """

    /// Issue 55: the state indexes cover finished rows only. An unfinished task's state changes with every pause,
    /// resume and retry, and moving its entry in two indexes was four of a state change's ten pages; the daemon
    /// lists unfinished tasks by state from memory (`TaskTable`), the journal only finished ones. A query that is to
    /// use these indexes says "finished" as `Journal.isFinished` does.
    static let v18 = """
        DROP INDEX tasks_by_state;
        DROP INDEX tasks_by_session_state;
        CREATE INDEX tasks_by_state ON tasks(state)
            WHERE (state = 'completed' OR state = 'failed' OR state = 'canceled');
        CREATE INDEX tasks_by_session_state ON tasks(session, state)
            WHERE (state = 'completed' OR state = 'failed' OR state = 'canceled');
        """
}
