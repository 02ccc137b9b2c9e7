import GRDB
import HalfTunesProtocol

extension Journal {
    /// Appends the events in one transaction and returns them with `seq` assigned (ascending, in order). For tests
    /// (the daemon journals events with their task's row: `updateTask`, `submitTasks`).
    /// Only journaled payload types are accepted; every event's session (and task, if set) must exist.
    @discardableResult
    func appendEvents(_ events: [Event]) throws -> [Event] {
        try Journal.checkJournaled(events, session: nil)
        if events.isEmpty { return [] }
        return try write(numbering: events) { db, numbered in try Journal.append(numbered, db) }
    }

    /// The session's journaled events with seq > `after`, ascending, with `seq` set.
    public func events(session: String, after: Int64, limit: Int = Int(Int32.max)) throws -> [Event] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT seq, session, json FROM events WHERE session = ? AND seq > ? ORDER BY seq LIMIT ?",
                             arguments: [session, after, limit]).map(Event.init(row:))
        }
    }

    /// How many journaled events of the session are kept (not yet acknowledged).
    /// The number of journaled (unacknowledged) events of every session that has any.
    public func eventCounts() throws -> [String: Int] {
        try read { db in
            var counts: [String: Int] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT session, count(*) FROM events GROUP BY session") {
                counts[row[0]] = row[1]
            }
            return counts
        }
    }

    /// The highest seq ever journaled for the session (0 if none ever, or no such session). Kept in the
    /// session row, so it stays correct after `ack` pruned the events.
    public func lastEventSeq(session: String) throws -> Int64 {
        try read { db in
            try Int64.fetchOne(db, sql: "SELECT last_event_seq FROM sessions WHERE identifier = ?",
                               arguments: [session]) ?? 0
        }
    }

    /// Sets the session's `acked_through` to max(old, through) and deletes its events with seq <= through,
    /// in one transaction. Returns the number of events deleted. Throws `unknownSession`.
    /// Acknowledges (deletes) the session's events through `through`. A data task whose `didComplete` event
    /// goes with them loses its body in the same transaction: the body is journaled for its completion only,
    /// and once that was delivered and acknowledged nothing of it is kept (status, headers and `bodyBytes`
    /// stay). Returns the number of events deleted and the tasks whose body was dropped.
    public func ack(session: String, through: Int64) throws -> (pruned: Int, droppedBodies: [Int64]) {
        try write { db in
            try db.cachedStatement(sql: "UPDATE sessions SET acked_through = max(acked_through, ?) WHERE identifier = ?")
                .execute(arguments: [through, session])
            guard db.changesCount == 1 else { throw JournalError.unknownSession(session) }
            // The tasks whose completion goes with these events (read before they go, from the acknowledged
            // events only: the cost follows what is acknowledged, not how many tasks the session has).
            let completed = try Int64.fetchAll(db.cachedStatement(sql: """
                SELECT task FROM events WHERE session = ? AND seq <= ? AND type = 'didComplete' AND task IS NOT NULL
                """), arguments: [session, through])
            try db.cachedStatement(sql: "DELETE FROM events WHERE session = ? AND seq <= ?")
                .execute(arguments: [session, through])
            let pruned = db.changesCount
            // One question per acknowledged completion (does it drop a body?), on a statement prepared once: a
            // client acknowledges every few completions.
            var dropped: [Int64] = []
            for id in completed {
                let hasBody = try Bool.fetchOne(db.cachedStatement(sql: """
                    SELECT 1 FROM tasks WHERE id = ? AND kind = 'data' AND response IS NOT NULL
                        AND json_extract(response, '$.body') IS NOT NULL AND \(Journal.isFinished)
                        AND NOT EXISTS (SELECT 1 FROM events WHERE events.task = tasks.id AND events.type = 'didComplete')
                    """), arguments: [id]) ?? false
                if hasBody { dropped.append(id) }
            }
            for id in dropped {
                try db.cachedStatement(sql: "UPDATE tasks SET response = json_remove(response, '$.body') WHERE id = ?")
                    .execute(arguments: [id])
            }
            return (pruned, dropped)
        }
    }

    /// Rejects live-only events, and (when `session` is given) events of another session.
    static func checkJournaled(_ events: [Event], session: String?) throws {
        for event in events {
            guard event.payload.isJournaled else { throw JournalError.notJournaled(type: event.type) }
            if let session, event.session != session {
                throw JournalError.eventSessionMismatch(task: session, event: event.session)
            }
        }
    }

    static func requireSession(_ identifier: String, _ db: Database) throws {
        let exists = try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM sessions WHERE identifier = ?"),
                                       arguments: [identifier]) ?? false
        if !exists { throw JournalError.unknownSession(identifier) }
    }

    /// What the write appending events already established: a task row it wrote, with its session (which
    /// therefore exists: the row's foreign key), so its events need no lookup of either.
    struct WrittenRow {
        var task: Int64
        var session: String
    }

    /// Inserts events (numbered by `JournalWriter` when submitted) inside the caller's transaction (v17's trigger
    /// advances each session's `last_event_seq`). Each event's session must exist and its task (if any) belong to it;
    /// `written` names a row the same write stored, whose task and session are taken as checked.
    static func append(_ events: [Event], _ db: Database, written: [WrittenRow] = []) throws -> [Event] {
        let createdAt = Timestamp.now()
        // Sessions known to exist and tasks' owners. Most writes append the events of one task: the last one
        // confirmed is kept apart, so they allocate no table.
        var lastSession: String?
        var lastTask: WrittenRow?
        var sessions: Set<String> = []
        var owners: [Int64: String] = [:]
        if written.count == 1 {
            lastSession = written[0].session
            lastTask = written[0]
        } else {
            for row in written {
                sessions.insert(row.session)
                owners[row.task] = row.session
            }
        }
        var stored: [Event] = []
        stored.reserveCapacity(events.count)
        let insert = try db.cachedStatement(
            sql: "INSERT INTO events (seq, session, task, type, created_at, json) VALUES (?, ?, ?, ?, ?, ?)")
        for var event in events {
            if event.session != lastSession {
                if !sessions.contains(event.session) {
                    try requireSession(event.session, db)
                    sessions.insert(event.session)
                }
                lastSession = event.session
            }
            if let task = event.task, task != lastTask?.task {
                let owner: String
                if let known = owners[task] {
                    owner = known
                } else {
                    guard let found = try String.fetchOne(db.cachedStatement(sql: "SELECT session FROM tasks WHERE id = ?"),
                                                          arguments: [task]) else {
                        throw JournalError.unknownTask(task)
                    }
                    owner = found
                    owners[task] = found
                }
                lastTask = WrittenRow(task: task, session: owner)
            }
            if event.task != nil, let owner = lastTask?.session, owner != event.session {
                throw JournalError.eventSessionMismatch(task: owner, event: event.session)
            }
            guard let seq = event.seq else { throw JournalError.eventNotNumbered }
            event.seq = nil
            try insert.executeBound([seq, event.session, event.task, event.type, createdAt, try JSONText.encode(event)])
            event.seq = seq
            stored.append(event)
        }
        return stored
    }
}
