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
            try db.execute(sql: "UPDATE sessions SET acked_through = max(acked_through, ?) WHERE identifier = ?",
                           arguments: [through, session])
            guard db.changesCount == 1 else { throw JournalError.unknownSession(session) }
            // The tasks whose completion goes with these events (read before they go, from the acknowledged
            // events only: the cost follows what is acknowledged, not how many tasks the session has).
            let completed = try Int64.fetchAll(db, sql: """
                SELECT task FROM events WHERE session = ? AND seq <= ? AND type = 'didComplete' AND task IS NOT NULL
                """, arguments: [session, through])
            try db.execute(sql: "DELETE FROM events WHERE session = ? AND seq <= ?", arguments: [session, through])
            let pruned = db.changesCount
            var dropped: [Int64] = []
            for id in completed {
                let hasBody = try Bool.fetchOne(db, sql: """
                    SELECT 1 FROM tasks WHERE id = ? AND kind = 'data' AND response IS NOT NULL
                        AND json_extract(response, '$.body') IS NOT NULL AND state IN ('completed', 'failed', 'canceled')
                        AND NOT EXISTS (SELECT 1 FROM events WHERE events.task = tasks.id AND events.type = 'didComplete')
                    """, arguments: [id]) ?? false
                if hasBody { dropped.append(id) }
            }
            for id in dropped {
                try db.execute(sql: "UPDATE tasks SET response = json_remove(response, '$.body') WHERE id = ?", arguments: [id])
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

    /// Inserts events (numbered by `JournalWriter` when submitted) inside the caller's transaction and advances
    /// each session's `last_event_seq`.
    static func append(_ events: [Event], _ db: Database) throws -> [Event] {
        let createdAt = Timestamp.now()
        var taskOwners: [Int64: String] = [:]
        var lastSeq: [String: Int64] = [:]
        var stored: [Event] = []
        stored.reserveCapacity(events.count)
        let insert = try db.cachedStatement(
            sql: "INSERT INTO events (seq, session, task, type, created_at, json) VALUES (?, ?, ?, ?, ?, ?)")
        for var event in events {
            if lastSeq[event.session] == nil { try requireSession(event.session, db) }
            if let task = event.task {
                let owner: String
                if let known = taskOwners[task] {
                    owner = known
                } else {
                    guard let found = try String.fetchOne(db.cachedStatement(sql: "SELECT session FROM tasks WHERE id = ?"),
                                                          arguments: [task]) else {
                        throw JournalError.unknownTask(task)
                    }
                    owner = found
                    taskOwners[task] = found
                }
                if owner != event.session {
                    throw JournalError.eventSessionMismatch(task: owner, event: event.session)
                }
            }
            guard let seq = event.seq else { throw JournalError.eventNotNumbered }
            event.seq = nil
            try insert.execute(arguments: [seq, event.session, event.task, event.type, createdAt, try JSONText.encode(event)])
            event.seq = seq
            lastSeq[event.session] = seq
            stored.append(event)
        }
        for (session, seq) in lastSeq {
            try db.cachedStatement(sql: "UPDATE sessions SET last_event_seq = max(last_event_seq, ?) WHERE identifier = ?")
                .execute(arguments: [seq, session])
        }
        return stored
    }
}
