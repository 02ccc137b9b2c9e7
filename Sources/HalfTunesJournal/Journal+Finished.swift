import GRDB
import HalfTunesCore
import HalfTunesProtocol

/// Finished tasks (completed, failed, canceled) live in the journal only: the daemon loads the unfinished ones,
/// counts the finished ones, and reads them by id or by page when a client asks.
extension Journal {
    /// "The task is finished", as the `tasks_finished` index and the triggers of `finished_counts` say it (schema
    /// v14): comparisons, not an `IN` list (SQLite builds a temporary b-tree for each run of a statement with an
    /// `IN` list of three values). A query that is to use the partial index must say it exactly so.
    static let isFinished = finished(column: "state")
    /// `isFinished` tested on the row, not through an index (`+state`).
    static let isFinishedOnTheRow = finished(column: "+state")

    private static func finished(column: String) -> String {
        "(\(column) = '\(TaskState.completed.rawValue)' OR \(column) = '\(TaskState.failed.rawValue)' OR \(column) = '\(TaskState.canceled.rawValue)')"
    }

    /// The ids of up to `limit` tasks with ids above `after`, ascending, of `sessions` (every session when nil), in
    /// `state` when given: one page of `task.list`, read through an index whose rows are in id order (rows are read
    /// only for the finished tasks on it, with `loadTask`) — the primary key, or `tasks_by_state`,
    /// `tasks_by_session`, `tasks_by_session_state`. Several sessions (a user's own, none named): one range per
    /// session, merged in id order by SQLite (a `UNION ALL` of ranges in id order is merged, not sorted), about
    /// `limit` + sessions index entries read, whatever the sessions hold. The state indexes hold finished rows
    /// only (schema v18): an unfinished `state` is found by reading rows in id order (the daemon lists those from
    /// memory).
    func taskIDs(after: Int64, sessions: [String]?, state: TaskState?, limit: Int) throws -> [Int64] {
        if let sessions, sessions.count > 1 {
            var ids: [Int64] = []
            for start in stride(from: 0, to: sessions.count, by: Self.mergedRanges) {
                let chunk = sessions[start..<min(start + Self.mergedRanges, sessions.count)]
                ids += try taskIDs(after: after, eachOf: chunk, state: state, limit: limit)
            }
            return sessions.count > Self.mergedRanges ? Array(ids.sorted().prefix(limit)) : ids
        }
        var conditions = ["id > ?"]
        var arguments: StatementArguments = [after]
        if let sessions {
            guard let session = sessions.first else { return [] }
            conditions.append("session = ?")
            arguments += [session]
        }
        if let state {
            conditions.append(Self.stateCondition(state))
            arguments += [state.rawValue]
        }
        arguments += [limit]
        let sql = "SELECT id FROM tasks WHERE " + conditions.joined(separator: " AND ") + " ORDER BY id LIMIT ?"
        return try read { db in try Int64.fetchAll(db.cachedStatement(sql: sql), arguments: arguments) }
    }

    /// `state = ?`, with the partial state indexes' condition for a finished state (so that SQLite uses them).
    private static func stateCondition(_ state: TaskState) -> String {
        state.isTerminal ? "state = ? AND " + isFinished : "state = ?"
    }

    /// At most this many sessions' ranges in one statement (SQLite allows 500 terms in a compound SELECT).
    static let mergedRanges = 400

    /// The first `limit` ids above `after` among `sessions`' tasks (in `state`), one range each, merged.
    private func taskIDs(after: Int64, eachOf sessions: ArraySlice<String>, state: TaskState?, limit: Int) throws -> [Int64] {
        let range = "SELECT id FROM tasks WHERE session = ? AND id > ?" + (state.map { " AND " + Self.stateCondition($0) } ?? "")
        let sql = Array(repeating: range, count: sessions.count).joined(separator: " UNION ALL ") + " ORDER BY id LIMIT ?"
        var arguments: StatementArguments = []
        for session in sessions {
            arguments += [session, after]
            if let state { arguments += [state.rawValue] }
        }
        arguments += [limit]
        // Not cached: one statement per number of sessions would stay prepared for the daemon's life.
        return try read { db in try Int64.fetchAll(db.makeStatement(sql: sql), arguments: arguments) }
    }

    /// One page of `task.list`: the ids `taskIDs` gives, and the rows of the finished tasks among them (the
    /// unfinished ones the daemon describes from memory), each with its text from `describe` when given. Rows kept
    /// from an earlier page are not read, nor described, again (`finishedRows`); the others are read in one
    /// statement, described, and kept.
    public func taskPage(after: Int64, sessions: [String]?, state: TaskState?, limit: Int,
                         describe: (@Sendable (TaskRecord) -> TaskInfoText)? = nil) throws -> TaskPage {
        let ids = try taskIDs(after: after, sessions: sessions, state: state, limit: limit)
        guard !ids.isEmpty else { return TaskPage(ids: [], finished: [:]) }
        let finished = try read { db in
            var finished = finishedRows.rows(ids)
            // Kept by a page read without a description: described now, and kept so (in the read, as below).
            if let describe {
                let bare = finished.values.filter { $0.text == nil }.map { FinishedRow(record: $0.record, text: describe($0.record)) }
                for row in bare { finished[row.record.id!] = row }
                finishedRows.keep(bare)
            }
            guard finished.count < ids.count else { return finished }
            let unread = ids.filter { finished[$0] == nil }
            // By primary key (`+state`: not through `tasks_by_state`, which would look each id up once per state).
            let sql = "SELECT * FROM tasks WHERE id IN (" + Journal.placeholders(unread.count) + ") AND \(Journal.isFinishedOnTheRow)"
            let rows = try Journal.taskRecords(db, sql: sql, arguments: StatementArguments(unread)).map { record in
                FinishedRow(record: record, text: describe?(record))
            }
            finishedRows.keep(rows) // in the read: no change of these rows can come before
            for row in rows { if let id = row.record.id { finished[id] = row } }
            return finished
        }
        return TaskPage(ids: ids, finished: finished)
    }

    /// `count` statement parameters, "?, ?, ?", for an `IN (…)` list or a row of values.
    static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }

    /// Task rows by id.
    static func byID(_ records: [TaskRecord]) -> [Int64: TaskRecord] {
        Dictionary(records.compactMap { r in r.id.map { ($0, r) } }, uniquingKeysWith: { a, _ in a })
    }

    /// The task rows a query selects (`SELECT * FROM tasks …`), column positions looked up once.
    static func taskRecords(_ db: Database, sql: String, arguments: StatementArguments = []) throws -> [TaskRecord] {
        var records: [TaskRecord] = []
        var positions: [String: Int]?
        let statement = try db.cachedStatement(sql: sql)
        let fast = TaskRowReader(statement)
        let rows = try Row.fetchCursor(statement, arguments: arguments)
        while let row = try rows.next() {
            // The usual row straight from SQLite; anything else the general way, for its conversions and errors.
            if let record = fast?.record() {
                records.append(record)
                continue
            }
            let p = positions ?? RowReader.positions(of: row)
            positions = p
            records.append(try TaskRecord(row: row, positions: p))
        }
        return records
    }

    /// Deletes up to `limit` finished tasks of `session` that finished at or before `finishedBefore` and have no
    /// event left to acknowledge (acknowledged events are deleted, so none of the task's remain), with their
    /// data-task bodies; the oldest first (`tasks_finished` index: finished rows newer than the cutoff are not
    /// read). Returns how many went, per state (the `finished_counts` triggers follow on their own).
    /// `keeping`: ids never deleted (tasks the daemon still has in memory: a transfer still stopping, say).
    ///
    /// Only tasks finished at or before the session's first event left to acknowledge are read: one finished
    /// later has that event's successors to acknowledge (its own last event among them), so a client away for a
    /// day with 50,000 finished tasks it has not acknowledged costs each sweep nothing, where every sweep read
    /// them all again. `NOT EXISTS` still decides. A wall clock set back can leave an acknowledged task stamped
    /// after that event: it goes once that event is acknowledged.
    public func deleteFinishedTasks(session: String, finishedBefore: Double, limit: Int,
                                    keeping: Set<Int64> = []) throws -> [TaskState: Int] {
        try write { db in
            // One bound for the index range (SQLite ranges over one of two upper bounds and filters by the other).
            let firstToAcknowledge = try Double.fetchOne(db.cachedStatement(
                sql: "SELECT created_at FROM events WHERE session = ? ORDER BY seq LIMIT 1"), arguments: [session])
            let cutoff = min(finishedBefore, firstToAcknowledge ?? .infinity)
            let rows = try Row.fetchAll(db.cachedStatement(sql: Self.sweepSQL), arguments: [session, cutoff, limit])
            var deleted: [TaskState: Int] = [:]
            let delete = try db.cachedStatement(sql: "DELETE FROM tasks WHERE id = ?")
            for row in rows where !keeping.contains(row["id"]) {
                try delete.execute(arguments: [row["id"] as Int64])
                if let state = TaskState(rawValue: row["state"]) { deleted[state, default: 0] += 1 }
            }
            return deleted
        }
    }

    /// The tasks a sweep deletes (`deleteFinishedTasks`): arguments session, cutoff (the retention's, and before
    /// the session's first event left to acknowledge), limit.
    static let sweepSQL = """
        SELECT id, state FROM tasks INDEXED BY tasks_finished
            WHERE session = ? AND \(isFinished) AND updated_at <= ? AND phase != 'publishing'
            AND NOT EXISTS (SELECT 1 FROM events WHERE events.task = tasks.id)
            ORDER BY updated_at LIMIT ?
        """

    /// Gives every page freed by deletions (finished tasks, acknowledged events) back to the file system
    /// (`auto_vacuum = INCREMENTAL`); the cost follows the pages freed since the last call.
    public func releaseFreePages() throws {
        try write { db in try db.execute(sql: "PRAGMA incremental_vacuum") }
        try truncateWAL()
    }
}
