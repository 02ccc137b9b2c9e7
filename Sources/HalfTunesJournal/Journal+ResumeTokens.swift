import GRDB

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

    /// How many tokens the sessions of `uid` hold (each keeps a partial file).
    public func resumeTokenCount(uid: UInt32) throws -> Int {
        try read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM resume_tokens WHERE session IN (SELECT identifier FROM sessions WHERE uid = ?)",
                             arguments: [uid]) ?? 0
        }
    }

    /// Deletes the token; deleting an unknown token does nothing.
    public func deleteResumeToken(_ token: String) throws {
        try write { db in
            try db.execute(sql: "DELETE FROM resume_tokens WHERE token = ?", arguments: [token])
        }
    }
}
