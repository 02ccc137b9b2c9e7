import GRDB
import HalfTunesCore
import HalfTunesProtocol

extension Journal {
    /// Every session, ordered by identifier.
    public func loadSessions() throws -> [SessionRecord] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM sessions ORDER BY identifier").map(SessionRecord.init(row:))
        }
    }

    /// What the journal holds for the sessions of `uid`, in bytes (`journaled_bytes`, kept by triggers: their
    /// configurations, their events' JSON and their tasks' text columns, data-task bodies included).
    public func journaledBytes(uid: UInt32) throws -> Int64 {
        try read { db in
            try Int64.fetchOne(db, sql: "SELECT ifnull(SUM(journaled_bytes), 0) FROM sessions WHERE uid = ?",
                               arguments: [Int64(uid)]) ?? 0
        }
    }

    /// Inserts the session or replaces its row. `acked_through` never decreases (the stored value wins if it is
    /// higher) and `last_event_seq` is kept: both belong to the journal's event bookkeeping.
    public func upsertSession(_ s: SessionRecord) throws {
        let configuration = try JSONText.encode(s.configuration)
        try write { db in
            try db.execute(
                sql: """
                    INSERT INTO sessions (identifier, uid, configuration, state, created_at, acked_through)
                    VALUES (?, ?, ?, ?, ?, ?)
                    ON CONFLICT(identifier) DO UPDATE SET
                        uid = excluded.uid,
                        configuration = excluded.configuration,
                        state = excluded.state,
                        created_at = excluded.created_at,
                        acked_through = max(acked_through, excluded.acked_through)
                    """,
                arguments: [s.identifier, Int64(s.uid), configuration, s.state.rawValue, s.createdAt, s.ackedThrough])
        }
    }

    /// Records how starting the session's `launchUnit` went (nil: clears it). An unknown session is ignored.
    public func setSessionLaunch(_ identifier: String, _ launch: SessionLaunchRecord?) throws {
        let text = try launch.map { try JSONText.encode($0) }
        try write { db in
            try db.execute(sql: "UPDATE sessions SET launch = ? WHERE identifier = ?", arguments: [text, identifier])
        }
    }

    /// Deletes the session (as `deleteSession`) only if it is still invalidating, and returns the resume tokens
    /// deleted with it (their partial files are the caller's to remove); nil, and nothing deleted, for a session
    /// that is not invalidating (gone, or opened again under the same identifier).
    public func deleteInvalidatedSession(_ identifier: String) throws -> [ResumeTokenRecord]? {
        try write { db in
            let state = try String.fetchOne(db, sql: "SELECT state FROM sessions WHERE identifier = ?", arguments: [identifier])
            guard state == SessionState.invalidating.rawValue else { return nil }
            let tokens = try Row.fetchAll(db, sql: "SELECT * FROM resume_tokens WHERE session = ? ORDER BY token",
                                          arguments: [identifier]).map(ResumeTokenRecord.init(row:))
            for table in ["events", "resume_tokens", "tasks"] {
                try db.execute(sql: "DELETE FROM \(table) WHERE session = ?", arguments: [identifier])
            }
            try db.execute(sql: "DELETE FROM sessions WHERE identifier = ?", arguments: [identifier])
            return tokens
        }
    }

    /// Deletes the session with its tasks, events and resume tokens, in one transaction. Deleting an unknown
    /// session does nothing. Event sequence numbers and task ids stay used (AUTOINCREMENT).
    func deleteSession(_ identifier: String) throws {
        try write { db in
            for table in ["events", "resume_tokens", "tasks"] {
                try db.execute(sql: "DELETE FROM \(table) WHERE session = ?", arguments: [identifier])
            }
            try db.execute(sql: "DELETE FROM sessions WHERE identifier = ?", arguments: [identifier])
        }
    }
}
