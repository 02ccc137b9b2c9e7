import GRDB
import HalfTunesCore
import HalfTunesProtocol
import Testing
@testable import HalfTunesJournal

/// TaskRowReader (task rows straight from SQLite, for restarts) reads exactly what the general decoding reads,
/// and leaves every row it cannot read as usual to it.
@Suite struct TaskRowReaderTests {
    @Test func readsWhatTheGeneralDecodingReads() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        var waiting = Sample.fullTask()
        waiting.phase = .transfer
        var odd = Sample.task(name: "ünïcødé \u{1F3B5} \"q\"")
        odd.headers = ["X-A": "1", "X-B": "ä"]
        odd.description = ""
        for t in [Sample.task(name: "a"), waiting, odd, Sample.task(name: "b", state: .queued)] {
            _ = try journal.insertTask(t, events: [])
        }
        let (fast, general, fastRows) = try journal.read { db -> ([TaskRecord], [TaskRecord], Int) in
            let statement = try db.makeStatement(sql: "SELECT * FROM tasks ORDER BY id")
            let reader = try #require(TaskRowReader(statement))
            var fast: [TaskRecord] = [], general: [TaskRecord] = []
            let rows = try Row.fetchCursor(statement)
            while let row = try rows.next() {
                if let record = reader.record() { fast.append(record) }
                general.append(try TaskRecord(row: row))
            }
            return (fast, general, fast.count)
        }
        #expect(fastRows == 4)
        #expect(fast == general)
        #expect(try journal.loadUnfinishedTasks() == general)
    }

    /// Found by the `rows` fuzzer: a NUL in a text column (a row edited by hand) was read whole by the fast
    /// reader and cut at the NUL by the general decoding, so a restart and a later read saw two destinations, and
    /// the kernel a third. Now the fast reader leaves such a row to the general decoding: one text, without NUL.
    @Test func aNULInATextColumnIsReadAsTheGeneralDecodingReadsIt() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        let (task, _) = try journal.insertTask(Sample.task(name: "nul"), events: [])
        try journal.dbQueue.write { db in
            try db.execute(sql: "UPDATE tasks SET destination = '/d/a' || char(0) || 'b' WHERE id = ?", arguments: [task.id!])
        }
        let (fast, general) = try journal.read { db -> (TaskRecord?, TaskRecord) in
            let statement = try db.makeStatement(sql: "SELECT * FROM tasks")
            let reader = try #require(TaskRowReader(statement))
            let rows = try Row.fetchCursor(statement)
            let row = try #require(try rows.next())
            return (reader.record(), try TaskRecord(row: row))
        }
        #expect(fast == nil, "left to the general decoding")
        #expect(!general.destination.utf8.contains(0), "\(general.destination)")
        #expect(try journal.loadUnfinishedTasks().map(\.destination) == [general.destination])
    }

    @Test func aRowNotStoredAsUsualIsLeftToTheGeneralDecoding() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        let (plain, _) = try journal.insertTask(Sample.task(name: "plain"), events: [])
        let (blob, _) = try journal.insertTask(Sample.task(name: "blob"), events: [])
        let (bad, _) = try journal.insertTask(Sample.task(name: "bad"), events: [])
        try journal.dbQueue.write { db in
            // A BLOB in a TEXT column keeps its storage class; a JSON column that is not JSON.
            try db.execute(sql: "UPDATE tasks SET etag = x'6869' WHERE id = ?", arguments: [blob.id!])
            try db.execute(sql: "UPDATE tasks SET error = 'not json' WHERE id = ?", arguments: [bad.id!])
        }
        let read = try journal.read { db -> [Bool] in
            let statement = try db.makeStatement(sql: "SELECT * FROM tasks ORDER BY id")
            let reader = try #require(TaskRowReader(statement))
            var read: [Bool] = []
            let rows = try Row.fetchCursor(statement)
            while try rows.next() != nil { read.append(reader.record() != nil) }
            return read
        }
        #expect(read == [true, false, false])
        // The general decoding then explains the bad row, as before.
        #expect(throws: JournalError.self) { try journal.loadUnfinishedTasks() }
        try journal.dbQueue.write { db in try db.execute(sql: "DELETE FROM tasks WHERE id = ?", arguments: [bad.id!]) }
        let loaded = try journal.loadUnfinishedTasks()
        #expect(loaded.map(\.id) == [plain.id, blob.id])
        let general = try journal.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM tasks WHERE id = ?", arguments: [blob.id!]).map { try TaskRecord(row: $0) }
        }
        #expect(loaded.last == general.first)
    }
}
