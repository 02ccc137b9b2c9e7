import Foundation
import GRDB
import HalfTunesCore
import HalfTunesProtocol
import Testing
@testable import HalfTunesJournal

@Suite struct SchemaTests {
    @Test func taskColumnsHasOneBitPerColumn() {
        #expect(TaskColumns.count == TaskRecord.columns.count)
        #expect(TaskColumns.all.rawValue == (1 << UInt64(TaskRecord.columns.count)) - 1)
    }

    @Test func migratesAnEmptyFileAndSetsThePragmas() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/journal.sqlite"
            let journal = try Journal(path: path)
            #expect(journal.schemaVersion == 18)
            #expect(journal.schemaVersion == Journal.latestSchemaVersion)
            #expect(journal.path == path)
            let tables = try journal.dbQueue.read { db in
                try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            }
            for table in ["events", "resume_tokens", "sessions", "settings", "tasks", "grdb_migrations", "sqlite_sequence"] {
                #expect(tables.contains(table), "missing table \(table) in \(tables)")
            }
            #expect(try pragma(journal, "journal_mode") == "wal")
            #expect(try pragma(journal, "synchronous") == "1")  // NORMAL: JournalDurability fsyncs the WAL (DurabilityTests)
            #expect(try pragma(journal, "foreign_keys") == "1")
            #expect(try pragma(journal, "busy_timeout") == String(Int(Journal.busyTimeout * 1000)))
            try journal.close()
        }
    }

    @Test func reopeningKeepsTheSchemaVersionAndTheData() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/journal.sqlite"
            let first = try Journal(path: path)
            try first.upsertSession(Sample.session())
            let (task, _) = try first.insertTask(Sample.fullTask(), events: [])
            try first.close()

            let second = try Journal(path: path)
            #expect(second.schemaVersion == 18)
            #expect(try second.loadSessions() == [Sample.session()])
            #expect(try second.loadTasks() == [task])
            try second.close()
        }
    }

    /// A journal written by a v1 daemon keeps its tasks, which get the v2 defaults (normal priority), and
    /// its sessions, qualified by their owner's uid (v3) everywhere, events included.
    @Test func aVersionOneJournalMigratesWithDefaults() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/journal.sqlite"
            var migrator = DatabaseMigrator()
            migrator.registerMigration("v1") { db in try db.execute(sql: JournalSchema.v1) }
            let queue = try DatabaseQueue(path: path)
            try migrator.migrate(queue)
            try queue.write { db in
                try db.execute(sql: "INSERT INTO sessions (identifier, uid, configuration, state, created_at, acked_through, last_event_seq) VALUES ('s', 1000, '{}', 'active', 1, 0, 0)")
                try db.execute(sql: "INSERT INTO tasks (session, kind, url, state, phase, destination, partial_path, headers, bytes_durable, attempts, queue_order, created_at, updated_at) VALUES ('s', 'download', 'http://h/f', 'queued', 'transfer', '/d/f', '/s/1.part', '{}', 5, 0, 1, 1, 1)")
                try db.execute(sql: #"INSERT INTO events (session, task, type, created_at, json) VALUES ('s', 1, 'stateChanged', 1, '{"previousState":null,"seq":null,"session":"s","state":"queued","task":1,"time":"t","type":"stateChanged"}')"#)
            }
            try queue.close()

            let journal = try Journal(path: path)
            #expect(journal.schemaVersion == 18)
            let tasks = try journal.loadTasks()
            #expect(tasks.count == 1)
            #expect(tasks.first?.priority == .normal)
            #expect(tasks.first?.session == "1000/s")
            #expect(try journal.loadSessions().map(\.identifier) == ["1000/s"])
            #expect(try journal.events(session: "1000/s", after: 0).map(\.session) == ["1000/s"])
            #expect(tasks.first?.checksum == nil && tasks.first?.response == nil)
            #expect(try journal.settings().isEmpty)
            try journal.setSettings(["bandwidth-limit": "1000", "max-concurrent": "3"])
            try journal.setSettings(["max-concurrent": nil])
            #expect(try journal.settings() == ["bandwidth-limit": "1000"])
            try journal.close()
        }
    }

    /// A session journaled with the single `{user, password}` of before v15 keeps them as one entry without an
    /// origin (sent nowhere); a session without credentials, or with the new form, is unchanged.
    @Test func aSessionsCredentialsWithoutAnOriginAreKeptAsAnEntryWithoutOne() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/journal.sqlite"
            let queue = try Self.journal(at: path, migratedThrough: 14)
            try queue.write { db in
                for (name, config) in [
                    ("old", #"{"credentials":{"user":"alice","password":"s3cret"},"headers":{}}"#),
                    ("none", #"{"headers":{}}"#),
                    ("new", #"{"credentials":[{"origin":"https://h","user":"bob","password":"p"}]}"#),
                ] {
                    try db.execute(sql: "INSERT INTO sessions (identifier, uid, configuration, state, created_at, acked_through, last_event_seq) VALUES (?, 1000, ?, 'active', 1, 0, 0)",
                                   arguments: ["1000/" + name, config])
                }
            }
            try queue.close()

            let journal = try Journal(path: path)
            let sessions = Dictionary(uniqueKeysWithValues: try journal.loadSessions().map { ($0.identifier, $0.configuration) })
            #expect(sessions["1000/old"]?.credentials == [OriginCredentials(origin: nil, user: "alice", password: "s3cret")])
            #expect(sessions["1000/old"]?.headers == [:])
            #expect(sessions["1000/none"]?.credentials == nil)
            #expect(sessions["1000/new"]?.credentials == [OriginCredentials(origin: "https://h", user: "bob", password: "p")])
            try journal.close()
        }
    }

    /// What the journal holds for each session (v16's `session_bytes`, v17's `journaled_bytes`) follows every
    /// insert, update, acknowledgement and delete, so a uid's share is one small read; a journal from before v16
    /// gets its sums at migration.
    @Test func whatTheJournalHoldsForEachUIDIsKeptByTriggers() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/journal.sqlite"
            let queue = try Self.journal(at: path, migratedThrough: 15)
            try queue.write { db in
                try db.execute(sql: "INSERT INTO sessions (identifier, uid, configuration, state, created_at, acked_through, last_event_seq) VALUES ('1000/old', 1000, '{}', 'active', 1, 0, 0)")
                try db.execute(sql: "INSERT INTO events (session, task, type, created_at, json) VALUES ('1000/old', NULL, 'x', 1, ?)",
                               arguments: [String(repeating: "e", count: 500)])
            }
            try queue.close()

            let journal = try Journal(path: path)
            #expect(try journal.journaledBytes(uid: 1000) == 502, "summed at migration: the event and the configuration")
            var other = Sample.session("2000/s")
            other.uid = 2000
            try journal.upsertSession(other)
            let configuration = try journal.journaledBytes(uid: 2000)
            #expect(configuration > 50 && configuration < 300, "the configuration counts: \(configuration)")
            other.configuration.headers = ["X-Big": String(repeating: "h", count: 2000)]
            try journal.upsertSession(other)
            #expect(try journal.journaledBytes(uid: 2000) > configuration + 1900, "a reconfiguration counts anew")
            other.configuration.headers = [:]
            try journal.upsertSession(other)
            let base = try journal.journaledBytes(uid: 2000)
            var t = Sample.task(session: "2000/s")
            t.description = String(repeating: "é", count: 500) // 1000 bytes of UTF-8
            let (stored, _) = try journal.insertTask(t, events: [])
            let row = try journal.journaledBytes(uid: 2000)
            #expect(row - base > 1000 && row - base < 1300, "\(row - base)")
            var updated = stored
            updated.response = TaskResponse(status: 200, headers: [], body: String(repeating: "b", count: 4000), bodyBytes: 3000, truncated: false)
            _ = try journal.updateTask(updated, events: [])
            #expect(try journal.journaledBytes(uid: 2000) > row + 4000)
            updated.response = nil
            _ = try journal.updateTask(updated, events: [])
            #expect(try journal.journaledBytes(uid: 2000) == row)
            #expect(try journal.journaledBytes(uid: 1000) == 502, "another uid's share is its own")
            _ = try journal.ack(session: "1000/old", through: 1)
            #expect(try journal.journaledBytes(uid: 1000) == 2)
            try journal.deleteSession("2000/s")
            #expect(try journal.journaledBytes(uid: 2000) == 0, "a session's delete takes its share with it")
            try journal.close()
        }
    }

    /// v17: a journal of v16 (4 KiB pages, events numbered by AUTOINCREMENT) keeps its rows and its counts, is
    /// rewritten with the small pages, and never hands out a seq used before: not one pruned by an
    /// acknowledgement, nor one of a session deleted since. The restart's rows follow `loaded`, which the triggers
    /// keep as rows finish, start publishing and end it.
    @Test func versionSixteenJournalsMigrateToFewerPagesPerChange() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/journal.sqlite"
            let queue = try Self.journal(at: path, migratedThrough: 16)
            try queue.write { db in
                for s in ["1000/kept", "1000/gone"] {
                    try db.execute(sql: "INSERT INTO sessions (identifier, uid, configuration, state, created_at) VALUES (?, 1000, '{}', 'active', 1)", arguments: [s])
                }
                for (state, phase) in [("queued", "transfer"), ("completed", "transfer"), ("completed", "publishing")] {
                    try db.execute(sql: "INSERT INTO tasks (session, kind, url, state, phase, destination, partial_path, headers, bytes_durable, attempts, queue_order, created_at, updated_at) VALUES ('1000/kept', 'download', 'http://h/f', ?, ?, '/d/f', '/s/1.part', '{}', 0, 0, 1, 1, 1)", arguments: [state, phase])
                }
                try db.execute(sql: "INSERT INTO events (session, task, type, created_at, json) VALUES ('1000/kept', 1, 'x', 1, '{}')")
                try db.execute(sql: "UPDATE sessions SET last_event_seq = 1 WHERE identifier = '1000/kept'")
                for _ in 0..<5 { try db.execute(sql: "INSERT INTO events (session, task, type, created_at, json) VALUES ('1000/gone', NULL, 'x', 1, '{}')") }
                try db.execute(sql: "UPDATE sessions SET last_event_seq = 6 WHERE identifier = '1000/gone'")
                try db.execute(sql: "DELETE FROM events WHERE seq = 6")
            }
            #expect(try queue.read { try Int.fetchOne($0, sql: "PRAGMA page_size") } == 4096)
            try queue.close()

            let journal = try Journal(path: path)
            #expect(journal.schemaVersion == 18)
            #expect(try pragma(journal, "page_size") == String(Journal.pageSize))
            #expect(try pragma(journal, "journal_mode") == "wal")
            #expect(try pragma(journal, "auto_vacuum") == "2")
            #expect(try journal.loadUnfinishedTasks().map(\.id) == [1, 3], "the queued task and the one publishing")
            try journal.deleteSession("1000/gone")
            let numbered = try journal.appendEvents([Sample.stateChanged(session: "1000/kept", task: 1, to: .running, from: .queued)])
            #expect(numbered.first?.seq == 7, "after the seq pruned (6) of the session deleted since")
            #expect(try journal.lastEventSeq(session: "1000/kept") == 7, "advanced by the event's trigger")

            var task = try #require(try journal.loadTask(1))
            task.state = .completed
            _ = try journal.updateTask(task, events: [])
            #expect(try journal.loadUnfinishedTasks().map(\.id) == [3])
            task.phase = .publishing
            _ = try journal.updateTask(task, events: [])
            #expect(try journal.loadUnfinishedTasks().map(\.id) == [1, 3])
            try journal.close()

            let reopened = try Journal(path: path)
            let again = try reopened.appendEvents([Sample.stateChanged(session: "1000/kept", task: 1, to: .running, from: .queued)])
            #expect(again.first?.seq == 8)
            try reopened.close()
        }
    }

    /// What one state change of one task writes (its row, one event: a resume or a pause) stays a few small pages,
    /// however many tasks the journal holds: the task's row, the event with its two index entries and the session's
    /// row, about five 1 KiB pages (no state index entry moves since v18). The WAL grows by 8 KiB or less for it on
    /// average (a change that splits a page writes a few more); it was ~11 KiB with the state indexes, ~49 KiB
    /// before v17.
    @Test func aStateChangeWritesAFewSmallPages() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/journal.sqlite"
            let journal = try Journal(path: path)
            try journal.upsertSession(Sample.session())
            var tasks: [TaskRecord] = []
            for i in 0..<2_000 { tasks.append(try journal.insertTask(Sample.task(name: "f\(i).bin"), events: []).0) }
            try journal.truncateWAL()
            func walBytes() -> Int64 {
                var st = stat()
                return stat(path + "-wal", &st) == 0 ? Int64(st.st_size) : 0
            }
            let before = walBytes()
            var changes: Int64 = 0
            for (i, var task) in tasks.enumerated() where i % 10 == 0 {
                task.state = .queued
                _ = try journal.updateTask(task, events: [Sample.stateChanged(task: task.id, to: .queued, from: .suspended)])
                changes += 1
            }
            let perChange = (walBytes() - before) / changes
            #expect(perChange > 0 && perChange <= 8 * 1024, "\(perChange) bytes of WAL per state change")
            try journal.close()
        }
    }

    /// A journal as the daemon of migration `count` left it.
    static func journal(at path: String, migratedThrough count: Int) throws -> DatabaseQueue {
        var migrator = DatabaseMigrator()
        for m in JournalSchema.migrations.prefix(count) {
            migrator.registerMigration(m.identifier) { db in try db.execute(sql: m.sql) }
        }
        let queue = try DatabaseQueue(path: path)
        try migrator.migrate(queue)
        return queue
    }

    @Test func createsTheFileReadableOnlyByItsOwner() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/journal.sqlite"
            let previous = umask(0o022)
            defer { umask(previous) }
            let journal = try Journal(path: path)
            try journal.upsertSession(Sample.session())
            #expect(fileMode(path) == 0o600)
            #expect(fileMode(path + "-wal") == 0o600)
            try journal.close()
        }
    }

    @Test func aMissingDirectoryIsAClearError() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/no/such/dir/journal.sqlite"
            #expect(throws: JournalError.cannotOpen(path: path, reason: "No such file or directory")) {
                try Journal(path: path)
            }
        }
    }

    @Test func refusesAJournalWrittenByANewerDaemon() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/journal.sqlite"
            let journal = try Journal(path: path)
            try journal.dbQueue.write { db in
                try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99-from-the-future')")
            }
            try journal.close()
            #expect(throws: JournalError.newerSchema(path: path, unknownMigrations: ["v99-from-the-future"])) {
                try Journal(path: path)
            }
        }
    }

    @Test func closedJournalRefusesCalls() throws {
        let journal = try Journal.openInMemory()
        try journal.close()
        try journal.close()
        #expect(throws: JournalError.closed) { try journal.loadSessions() }
        #expect(throws: JournalError.closed) { try journal.recordCheckpoint(task: 1, bytesDurable: 1) }
        #expect(throws: JournalError.closed) { try journal.upsertSession(Sample.session()) }
    }

    /// A crash leaves the main file and the WAL as they were at the last commit, with nobody checkpointing.
    /// Copying both while the writer is still open reproduces that state; opening the copy must run WAL recovery
    /// and see every committed write (and the main file alone must not, proving the data sat in the WAL).
    @Test func committedWritesSurviveACrashBeforeAnyCheckpoint() throws {
        try withTemporaryDirectory { dir in
            let live = dir + "/live"
            let crashed = dir + "/crashed"
            let mainOnly = dir + "/main-only"
            for d in [live, crashed, mainOnly] { try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: false) }

            let journal = try Journal(path: live + "/journal.sqlite")
            try journal.upsertSession(Sample.session())
            let (task, events) = try journal.insertTask(
                Sample.task(), events: [Sample.stateChanged(to: .suspended, from: nil)])
            try journal.recordCheckpoint(task: task.id!, bytesDurable: 65_536)
            let walSize = (try FileManager.default.attributesOfItem(atPath: live + "/journal.sqlite-wal")[.size]
                as? NSNumber)?.intValue ?? 0
            #expect(walSize > 0)

            let fm = FileManager.default
            try fm.copyItem(atPath: live + "/journal.sqlite", toPath: crashed + "/journal.sqlite")
            try fm.copyItem(atPath: live + "/journal.sqlite-wal", toPath: crashed + "/journal.sqlite-wal")
            try fm.copyItem(atPath: live + "/journal.sqlite", toPath: mainOnly + "/journal.sqlite")

            let recovered = try Journal(path: crashed + "/journal.sqlite")
            var expected = task
            expected.bytesDurable = 65_536
            #expect(try recovered.loadTasks() == [expected])
            #expect(try recovered.events(session: task.session, after: 0) == events)
            #expect(try recovered.lastEventSeq(session: task.session) == events.last?.seq)
            try recovered.close()

            let withoutWAL = try Journal(path: mainOnly + "/journal.sqlite")
            #expect(try withoutWAL.loadTasks().isEmpty)
            try withoutWAL.close()
            try journal.close()
        }
    }
}
