import GRDB
import HalfTunesCore

extension Journal {
    public func insertResumeToken(_ r: ResumeTokenRecord) throws {
        try write { db in
            try Journal.requireSession(r.session, db)
            try db.execute(
                sql: """
                    INSERT INTO resume_tokens (token, session, url, partial_path, destination, bytes, bytes_expected,
                                               etag, last_modified, created_at, ranges)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [r.token, r.session, r.url, r.partialPath, r.destination, r.bytes, r.bytesExpected,
                            r.etag, r.lastModified, r.createdAt, r.ranges.storedText])
        }
    }

    /// Fetches and deletes the token in one transaction: a token can be taken once. nil when unknown.
    public func takeResumeToken(_ token: String) throws -> ResumeTokenRecord? {
        try write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM resume_tokens WHERE token = ?",
                                             arguments: [token]) else { return nil }
            let record = try ResumeTokenRecord(row: row)
            try db.execute(sql: "DELETE FROM resume_tokens WHERE token = ?", arguments: [token])
            return record
        }
    }

    /// Tokens created strictly before `createdBefore` (seconds since 1970), oldest first. Pass
    /// `.infinity` for all of them.
    public func resumeTokens(createdBefore: Double) throws -> [ResumeTokenRecord] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM resume_tokens WHERE created_at < ? ORDER BY created_at, token",
                             arguments: [createdBefore]).map(ResumeTokenRecord.init(row:))
        }
    }

    /// The tokens of one session (`resume_tokens_by_session`), for its invalidation.
    public func resumeTokens(session: String) throws -> [ResumeTokenRecord] {
        try read { db in
            try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM resume_tokens WHERE session = ? ORDER BY token"),
                             arguments: [session]).map(ResumeTokenRecord.init(row:))
        }
    }

    /// How many tokens each uid's sessions hold (read once at start; the daemon counts from there).
    public func resumeTokenCounts() throws -> [UInt32: Int] {
        try read { db in
            var counts: [UInt32: Int] = [:]
            let rows = try Row.fetchCursor(db, sql: "SELECT s.uid, COUNT(*) FROM resume_tokens t JOIN sessions s ON s.identifier = t.session GROUP BY s.uid")
            while let row = try rows.next() {
                let uid: Int64 = row[0]
                counts[UInt32(truncatingIfNeeded: uid)] = row[1]
            }
            return counts
        }
    }

    /// Deletes the token; deleting an unknown token does nothing. For tests (the daemon takes one as it is redeemed,
    /// and as it expires: `takeResumeToken`).
    func deleteResumeToken(_ token: String) throws {
        try write { db in
            try db.execute(sql: "DELETE FROM resume_tokens WHERE token = ?", arguments: [token])
        }
    }
}
