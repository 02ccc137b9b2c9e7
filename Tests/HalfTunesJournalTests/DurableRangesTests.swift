// Durable ranges in the journal (schema v6): NULL is the prefix, other sets round-trip through every reader.
import Foundation
import GRDB
import HalfTunesCore
import HalfTunesProtocol
import Testing
@testable import HalfTunesJournal

@Suite struct DurableRangesTests {
    let segmented = ByteRanges([0..<1_048_576, 4_194_304..<5_242_880, 9_000_000..<9_000_001])

    /// A journal written before v6 keeps every task's and token's bytes as the range from 0.
    @Test func aVersionFiveJournalReadsItsBytesAsPrefixes() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/journal.sqlite"
            var migrator = DatabaseMigrator()
            for (identifier, sql) in JournalSchema.migrations where identifier != "v6" {
                migrator.registerMigration(identifier) { db in try db.execute(sql: sql) }
            }
            let queue = try DatabaseQueue(path: path)
            try migrator.migrate(queue)
            try queue.write { db in
                try db.execute(sql: "INSERT INTO sessions (identifier, uid, configuration, state, created_at, acked_through, last_event_seq) VALUES ('1000/s', 1000, '{}', 'active', 1, 0, 0)")
                try db.execute(sql: "INSERT INTO tasks (session, kind, url, state, phase, destination, partial_path, headers, bytes_durable, attempts, queue_order, created_at, updated_at) VALUES ('1000/s', 'download', 'http://h/f', 'queued', 'transfer', '/d/f', '/s/1.part', '{}', 5000, 0, 1, 1, 1)")
                try db.execute(sql: "INSERT INTO resume_tokens (token, session, url, partial_path, destination, bytes, created_at) VALUES ('t', '1000/s', 'http://h/f', '/s/2.part', '/d/g', 700, 1)")
            }
            try queue.close()

            let journal = try Journal(path: path)
            #expect(journal.schemaVersion == 18)
            let task = try #require(try journal.loadTasks().first)
            #expect(task.durableRanges == ByteRanges(prefix: 5000) && task.bytesDurable == 5000)
            #expect(try journal.loadUnfinishedTasks().first?.durableRanges == ByteRanges(prefix: 5000))
            #expect(try journal.takeResumeToken("t")?.ranges == ByteRanges(prefix: 700))
            try journal.close()
        }
    }

    /// Ranges written with a row, or by a checkpoint, read back the same through the general decoder and the
    /// restart's C reader; `bytes_durable` is always their sum, and a prefix is stored as NULL.
    @Test func rangesRoundTripThroughRowsAndCheckpoints() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        var record = Sample.task()
        record.durableRanges = segmented
        let (task, _) = try journal.insertTask(record, events: [])
        #expect(try journal.loadTask(task.id!)?.durableRanges == segmented)
        #expect(try journal.loadUnfinishedTasks().first?.durableRanges == segmented)
        #expect(try columns(journal, task.id!) == (segmented.count, segmented.text))

        var more = segmented
        more.insert(1_048_576..<4_194_304)
        try journal.submitCheckpoint(task: task.id!, durable: more, head: nil)
        journal.waitUntilWritten()
        #expect(try journal.loadTask(task.id!)?.durableRanges == more)
        #expect(try journal.loadUnfinishedTasks().first?.durableRanges == more)
        #expect(try columns(journal, task.id!) == (more.count, more.text))

        try journal.recordCheckpoint(task: task.id!, durable: ByteRanges(prefix: 9_000_001))
        #expect(try journal.loadTask(task.id!)?.durableRanges == ByteRanges(prefix: 9_000_001))
        #expect(try columns(journal, task.id!) == (9_000_001, nil), "a prefix is stored as NULL")

        var whole = try #require(try journal.loadTask(task.id!))
        whole.durableRanges = segmented
        try journal.updateTask(whole, events: [])
        #expect(try journal.loadUnfinishedTasks().first?.durableRanges == segmented)
    }

    /// v7: a task's own most connections round-trips through both readers; NULL (every row before) is nil.
    @Test func maxConnectionsRoundTripsAndDefaultsToNil() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        var record = Sample.task()
        record.maxConnections = 3
        let (task, _) = try journal.insertTask(record, events: [])
        let (plain, _) = try journal.insertTask(Sample.task(), events: [])
        #expect(try journal.loadTask(task.id!)?.maxConnections == 3)
        #expect(try journal.loadTask(plain.id!)?.maxConnections == nil)
        let unfinished = try journal.loadUnfinishedTasks()
        #expect(unfinished.first { $0.id == task.id }?.maxConnections == 3)
        #expect(unfinished.first { $0.id == plain.id }?.maxConnections == nil)
    }

    /// v8: a task's earliest begin date round-trips through both readers; NULL is nil.
    @Test func earliestBeginDateRoundTrips() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        var record = Sample.task()
        record.earliestBeginDate = 1_764_108_000.25
        let (task, _) = try journal.insertTask(record, events: [])
        let (plain, _) = try journal.insertTask(Sample.task(), events: [])
        #expect(try journal.loadTask(task.id!)?.earliestBeginDate == 1_764_108_000.25)
        #expect(try journal.loadTask(plain.id!)?.earliestBeginDate == nil)
        let unfinished = try journal.loadUnfinishedTasks()
        #expect(unfinished.first { $0.id == task.id }?.earliestBeginDate == 1_764_108_000.25)
        #expect(unfinished.first { $0.id == plain.id }?.earliestBeginDate == nil)
    }

    /// v9: a session's launch state round-trips; `upsertSession` leaves it alone; nil clears it.
    @Test func sessionLaunchRoundTrips() throws {
        let journal = try Journal.openInMemory()
        let session = Sample.session()
        try journal.upsertSession(session)
        #expect(try journal.loadSessions().first?.launch == nil)
        let launch = SessionLaunchRecord(lastLaunchAt: 10.5, lastResult: "failed", lastMessage: "result exit-code, exit status 1",
                                         nextAttemptAt: 20.5, failures: 1)
        try journal.setSessionLaunch(session.identifier, launch)
        try journal.upsertSession(session)
        #expect(try journal.loadSessions().first?.launch == launch)
        try journal.setSessionLaunch(session.identifier, nil)
        #expect(try journal.loadSessions().first?.launch == nil)
    }

    @Test func resumeTokensKeepTheirRanges() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        var token = ResumeToken.sample(token: "r")
        token.ranges = segmented
        try journal.insertResumeToken(token)
        let taken = try #require(try journal.takeResumeToken("r"))
        #expect(taken == token && taken.bytes == segmented.count)
    }

    /// Text that is not a canonical range set is a corrupt row, in both readers (the C reader leaves the row to
    /// the general decoding, which says what is wrong).
    @Test func badRangesAreACorruptRow() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        let (task, _) = try journal.insertTask(Sample.task(), events: [])
        try journal.dbQueue.write { db in
            try db.execute(sql: "UPDATE tasks SET durable_ranges = '10-5' WHERE id = ?", arguments: [task.id!])
        }
        let bad = JournalError.corruptRow(table: "tasks", key: String(task.id!), detail: "bad byte ranges '10-5'")
        #expect(throws: bad) { try journal.loadTask(task.id!) }
        #expect(throws: bad) { try journal.loadUnfinishedTasks() }
    }

    private func columns(_ journal: Journal, _ id: Int64) throws -> (Int64, String?) {
        try journal.read { db in
            let row = try #require(try Row.fetchOne(db, sql: "SELECT bytes_durable, durable_ranges FROM tasks WHERE id = ?",
                                                    arguments: [id]))
            return (row["bytes_durable"], row["durable_ranges"])
        }
    }
}
