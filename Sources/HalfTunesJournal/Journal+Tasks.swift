import Foundation
import GRDB
import HalfTunesCore
import HalfTunesProtocol

extension Journal {
    /// Every task, ordered by id.
    public func loadTasks() throws -> [TaskRecord] {
        try read { db in try Journal.taskRecords(db, sql: "SELECT * FROM tasks ORDER BY id") }
    }

    /// One task, or nil when there is no task with that id.
    public func loadTask(_ id: Int64) throws -> TaskRecord? {
        try read { db in try Journal.taskRecords(db, sql: "SELECT * FROM tasks WHERE id = ?", arguments: [id]).first }
    }

    /// The tasks of these ids that exist (one query for a page of `task.list`), by id.
    public func loadTasks(ids: [Int64]) throws -> [Int64: TaskRecord] {
        guard !ids.isEmpty else { return [:] }
        let sql = "SELECT * FROM tasks WHERE id IN (" + Journal.placeholders(ids.count) + ")"
        let records = try read { db in try Journal.taskRecords(db, sql: sql, arguments: StatementArguments(ids)) }
        return Journal.byID(records)
    }

    /// Inserts the task (assigning its id) and the events in ONE transaction. Events whose `task` is nil get
    /// the new id. Returns the stored task and the events with `seq` assigned.
    func insertTask(_ t: TaskRecord, events: [Event]) throws -> (TaskRecord, [Event]) {
        try insertTasks([(t, events)])[0]
    }

    /// Inserts new tasks, each with its events, in ONE transaction (one commit for all of them, so one
    /// WAL write of the pages they share); all of them or none. Returns them as `insertTask` does, in order.
    func insertTasks(_ tasks: [(task: TaskRecord, events: [Event])]) throws -> [(TaskRecord, [Event])] {
        let insert = try Journal.taskInsert(tasks, ids: writer.numberTasks(tasks.count))
        return try write(numbering: insert.events) { db, numbered in
            try insert.write(db, numbered)
            return insert.stored(numbered)
        }
    }

    /// `insertTasks` without waiting: each task's id and its events' `seq`s are handed out now, and the rows and
    /// events are queued for the journal's writer, in order after every write submitted before (so every later
    /// write about these tasks may be submitted at once). Returns the tasks and events as `insertTasks` does.
    /// Checks what can be checked now and throws as `insertTasks` does; the write's own outcome is `written`'s
    /// (a failure: a full disk, a session deleted meanwhile; then no task and no event of it is in the journal,
    /// and this journal never hands out their ids and seqs again; after a reopen, only ids and seqs beyond the
    /// last ones written are handed out, so those of a failed write that nothing followed may be again).
    public func submitTasks(_ tasks: [(task: TaskRecord, events: [Event])])
        throws -> (tasks: [(TaskRecord, [Event])], written: WriteOutcome)
    {
        let insert = try Journal.taskInsert(tasks, ids: writer.numberTasks(tasks.count))
        let written = WriteOutcome()
        let numbered = try submit(numbering: insert.events, done: { written.resolve($0) }) { db, numbered in
            try insert.write(db, numbered)
        }
        return (insert.stored(numbered), written)
    }

    static let insertRowSQL = "INSERT INTO tasks (id, \(TaskRecord.columns.joined(separator: ", "))) VALUES ("
        + Journal.placeholders(TaskRecord.columns.count + 1) + ")"

    /// New tasks' rows with the ids given, and their events (those without a task get its id), checked now; the
    /// write that inserts them with the events once numbered, and what it stores.
    struct TaskInsert {
        var records: [TaskRecord]
        var arguments: [StatementArguments]
        /// Every task's events, in order (numbered when submitted); `counts[i]` of them are task `i`'s.
        var events: [Event]
        var counts: [Int]
        /// The rows, each with its session (checked, then inserted, by `write` before the events).
        var written: [WrittenRow] = []

        func write(_ db: Database, _ numbered: [Event]) throws {
            var checkedSessions: Set<String> = []
            for (record, arguments) in zip(records, arguments) {
                if checkedSessions.insert(record.session).inserted { try Journal.requireSession(record.session, db) }
                try db.cachedStatement(sql: insertRowSQL).executeBound(arguments)
            }
            // The rows just inserted own their events; their sessions were checked above.
            _ = try Journal.append(numbered, db, written: written)
        }

        func stored(_ numbered: [Event]) -> [(TaskRecord, [Event])] {
            var next = numbered.startIndex
            return zip(records, counts).map { record, count in
                defer { next += count }
                return (record, Array(numbered[next..<(next + count)]))
            }
        }
    }

    static func taskInsert(_ tasks: [(task: TaskRecord, events: [Event])], ids: [Int64]) throws -> TaskInsert {
        var insert = TaskInsert(records: [], arguments: [], events: [], counts: [])
        insert.records.reserveCapacity(tasks.count)
        insert.arguments.reserveCapacity(tasks.count)
        for ((t, events), id) in zip(tasks, ids) {
            if let id = t.id { throw JournalError.taskAlreadyHasID(id) }
            try Journal.checkJournaled(events, session: t.session)
            var row = t
            row.id = id
            row.unwritten.bits = [] // the insert writes every column
            var arguments: StatementArguments = [id]
            arguments += try t.arguments()
            insert.records.append(row)
            insert.arguments.append(arguments)
            insert.events += events.map { event in
                var event = event
                if event.task == nil { event.task = id }
                return event
            }
            insert.counts.append(events.count)
            insert.written.append(WrittenRow(task: id, session: t.session))
        }
        return insert
    }

    /// Replaces the whole task row and appends the events in ONE transaction; returns the events with `seq`
    /// assigned. Throws `unknownTask` if the row does not exist (nothing is written then).
    @discardableResult
    public func updateTask(_ t: TaskRecord, events: [Event]) throws -> [Event] {
        let update = try Journal.rowUpdate(t, events)
        return try write(numbering: events) { db, numbered in try update(db, numbered) }
    }

    /// `updateTask` without waiting: the row and events are queued for the journal's writer, in order after
    /// every write submitted before. Returns the events with their `seq`s (numbered now); checks what can be
    /// checked now (an id, journaled events of the task's session) and throws as `updateTask` does, while a
    /// failure of the write itself (a task that no longer exists, a full disk) goes to `onSubmittedWriteFailure`.
    /// Durable, like any write, once `durability` covers `durability.lastCommit` read after this call.
    /// `done`, if given, gets the write's outcome instead of `onSubmittedWriteFailure` (on the writer's thread).
    public func submitTaskUpdate(_ t: TaskRecord, events: [Event],
                                 done: (@Sendable (Error?) -> Void)? = nil) throws -> [Event] {
        let update = try Journal.rowUpdate(t, events)
        return try submit(numbering: events, done: done) { db, numbered in _ = try update(db, numbered) }
    }

    /// The update of the columns in `columns` but `session`, which a task never changes: it is matched instead (a
    /// row of another session is not this task's). Only what changed is in the `SET` list: SQLite rewrites the
    /// entries of every index with a column there, and runs the triggers of those columns, changed or not.
    /// Arguments: the columns' values in `TaskRecord.columns` order, the id, the session.
    static func updateSQL(_ columns: TaskColumns) -> String {
        var set: [String] = []
        for (i, name) in TaskRecord.columns.enumerated() where i > 0 && columns.contains(TaskColumns(rawValue: 1 << i)) {
            set.append("\(name) = ?")
        }
        if set.isEmpty { return "SELECT 1 FROM tasks WHERE id = ? AND session = ?" }
        return "UPDATE tasks SET " + set.joined(separator: ", ") + " WHERE id = ? AND session = ?"
    }

    /// The column sets whose statements stay prepared. A few dozen occur (each kind of change the daemon makes);
    /// past this many, a set is written as the whole row, whose statement is prepared already.
    static let preparedColumnSets = PreparedColumnSets(limit: 64)

    /// Checks a row update with its events now; returns the write that updates the row's changed columns
    /// (`unknownTask` if it does not exist) and appends the events, numbered.
    static func rowUpdate(_ t: TaskRecord, _ events: [Event]) throws -> (Database, [Event]) throws -> [Event] {
        guard let id = t.id else { throw JournalError.taskHasNoID }
        try Journal.checkJournaled(events, session: t.session)
        let (columns, sql) = preparedColumnSets.statement(for: t.unwritten.bits.subtracting(.session))
        var arguments = try t.arguments(of: columns)
        arguments += [id, t.session]
        let isUpdate = !columns.isEmpty
        return { db, numbered in
            let statement = try db.cachedStatement(sql: sql)
            if isUpdate {
                try statement.executeBound(arguments)
                guard db.changesCount == 1 else { throw JournalError.unknownTask(id) }
            } else {
                guard try Bool.fetchOne(statement, arguments: arguments) == true else { throw JournalError.unknownTask(id) }
            }
            // The row now belongs to `t.session`, which exists (the row's foreign key).
            return try Journal.append(numbered, db, written: [Journal.WrittenRow(task: id, session: t.session)])
        }
    }

    /// The hot-path update of the durable bytes: one `UPDATE` of the durable columns, committed (and so fsynced)
    /// before it returns. Call it only after the partial file's data in `durable` was fsynced.
    func recordCheckpoint(task: Int64, durable: ByteRanges) throws {
        try write { db in try Journal.checkpoint(task, durable, nil, db) }
    }

    /// `recordCheckpoint` of the first `bytesDurable` bytes.
    func recordCheckpoint(task: Int64, bytesDurable: Int64) throws {
        try recordCheckpoint(task: task, durable: ByteRanges(prefix: bytesDurable))
    }

    /// `recordCheckpoint` without waiting (see `submitTaskUpdate`): queued for the journal's writer.
    /// `done`, when given, is told the write's outcome on the writer's thread (a failure is then not reported to
    /// `onSubmittedWriteFailure`).
    public func submitCheckpoint(task: Int64, durable: ByteRanges, head: CheckpointHead?,
                                 done: (@Sendable (Error?) -> Void)? = nil) throws {
        _ = try submit(done: done) { db, _ in try Journal.checkpoint(task, durable, head, db) }
    }

    static func checkpoint(_ task: Int64, _ durable: ByteRanges, _ head: CheckpointHead?, _ db: Database) throws {
        if let head {
            try db.cachedStatement(sql: """
                UPDATE tasks SET bytes_durable = ?, durable_ranges = ?, etag = ?, last_modified = ?,
                    bytes_expected = ?, current_url = ?
                WHERE id = ?
                """)
                .executeBound([durable.count, durable.storedText, head.etag, head.lastModified,
                               head.bytesExpected, head.currentURL, task])
        } else {
            try db.cachedStatement(sql: "UPDATE tasks SET bytes_durable = ?, durable_ranges = ? WHERE id = ?")
                .executeBound([durable.count, durable.storedText, task])
        }
        guard db.changesCount == 1 else { throw JournalError.unknownTask(task) }
    }

    /// `recordCheckpoint`, also recording the response the durable bytes came from.
    func recordCheckpoint(task: Int64, bytesDurable: Int64, head: CheckpointHead) throws {
        try write { db in try Journal.checkpoint(task, ByteRanges(prefix: bytesDurable), head, db) }
    }
}

/// The column sets `Journal.rowUpdate` has prepared statements for, with their SQL (built once per set), up to
/// `limit`; another set is widened to every column (`TaskColumns.all` without `session`), always kept.
final class PreparedColumnSets: @unchecked Sendable {
    private let lock = NSLock()
    private var sql: [TaskColumns: String]
    private let limit: Int
    private static let wholeRow = TaskColumns.all.subtracting(.session)
    private static let wholeRowSQL = Journal.updateSQL(wholeRow)

    init(limit: Int) {
        self.limit = limit
        sql = [Self.wholeRow: Self.wholeRowSQL]
    }

    /// The columns to write for `columns` (they, or the whole row) and their statement's SQL.
    func statement(for columns: TaskColumns) -> (TaskColumns, String) {
        lock.lock()
        defer { lock.unlock() }
        if let known = sql[columns] { return (columns, known) }
        guard sql.count < limit else { return (Self.wholeRow, Self.wholeRowSQL) }
        let text = Journal.updateSQL(columns)
        sql[columns] = text
        return (columns, text)
    }
}
