// The finished rows task.list pages keep: read once, and never served after any change of the row.
import GRDB
import HalfTunesCore
import HalfTunesProtocol
import Synchronization
import Testing
@testable import HalfTunesJournal

@Suite struct FinishedRowCacheTests {
    /// A journal with one session, three canceled tasks and one suspended one.
    static func journal() throws -> (Journal, [Int64], Int64) {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        var finished: [Int64] = []
        for i in 0..<3 {
            var t = Sample.task(name: "done\(i)", state: .canceled)
            t.error = TaskError(code: TaskErrorCode.canceled, message: "The task was canceled")
            finished.append(try journal.insertTask(t, events: []).0.id!)
        }
        let live = try journal.insertTask(Sample.task(name: "live"), events: []).0.id!
        return (journal, finished, live)
    }

    static func page(_ journal: Journal) throws -> TaskPage {
        try journal.taskPage(after: 0, sessions: ["com.example.app"], state: nil, limit: 50)
    }

    @Test func aPageListedAgainIsTheSameAndItsFinishedRowsAreKept() throws {
        let (journal, finished, live) = try Self.journal()
        let first = try Self.page(journal)
        #expect(first.ids == finished + [live])
        #expect(Set(first.finished.keys) == Set(finished), "the unfinished task is described from memory")
        #expect(journal.finishedRows.count == 3)
        #expect(try Self.page(journal) == first)
        #expect(try journal.loadTasks(ids: finished) == first.finished.mapValues(\.record), "what was kept is what the table holds")
    }

    /// Whatever statement changes a kept row (the journal's own, or any other on its connection), the next page
    /// reads it again; a change rolled back leaves the row as it was.
    @Test func anyChangeOfAKeptRowIsReadAgain() throws {
        let (journal, finished, _) = try Self.journal()
        _ = try Self.page(journal)
        var row = try #require(try journal.loadTask(finished[0]))
        row.description = "renamed"
        try journal.updateTask(row, events: [])
        #expect(try Self.page(journal).finished[finished[0]]?.record.description == "renamed")

        try journal.dbQueue.write { db in
            try db.execute(sql: "UPDATE tasks SET description = 'by hand' WHERE id = ?", arguments: [finished[1]])
        }
        #expect(try Self.page(journal).finished[finished[1]]?.record.description == "by hand")

        struct Undo: Error {}
        #expect(throws: Undo.self) {
            try journal.dbQueue.write { db in
                try db.execute(sql: "UPDATE tasks SET description = 'rolled back' WHERE id = ?", arguments: [finished[2]])
                throw Undo()
            }
        }
        #expect(try Self.page(journal).finished[finished[2]]?.record.description == nil)
        #expect(try Self.page(journal) == Self.page(journal))
    }

    @Test func deletedRowsAndADeletedSessionsRowsAreForgotten() throws {
        let (journal, finished, live) = try Self.journal()
        _ = try Self.page(journal)
        #expect(journal.finishedRows.count == 3)
        _ = try journal.deleteFinishedTasks(session: "com.example.app", finishedBefore: .infinity, limit: 1)
        #expect(journal.finishedRows.count == 2)
        let page = try Self.page(journal)
        #expect(page.ids == Array(finished.dropFirst()) + [live])
        try journal.deleteSession("com.example.app")
        #expect(journal.finishedRows.count == 0, "its rows went by the cascade")
        #expect(try Self.page(journal).ids.isEmpty)
    }

    /// A page read with a `describe` gives each finished row's text, made once: listed again, nothing is described
    /// again; a changed row is read and described again; a row kept by a page without one is described once.
    @Test func aFinishedRowIsDescribedOnceAndAgainAfterAChange() throws {
        let (journal, finished, _) = try Self.journal()
        let described = Mutex<[Int64]>([])
        let describe: @Sendable (TaskRecord) -> TaskInfoText = { record in
            described.withLock { $0.append(record.id!) }
            return TaskInfoText(TaskInfo(id: record.id!, session: record.session, kind: record.kind, url: record.url,
                                         state: record.state, bytesReceived: 0, bytesDurable: record.bytesDurable,
                                         bytesExpected: nil, destination: record.destination, error: record.error,
                                         createdAt: "c", updatedAt: "u", description: record.description))
        }
        func page() throws -> TaskPage {
            try journal.taskPage(after: 0, sessions: ["com.example.app"], state: nil, limit: 50, describe: describe)
        }
        _ = try journal.taskPage(after: 0, sessions: ["com.example.app"], state: nil, limit: 50) // kept bare
        let first = try page()
        #expect(described.withLock { $0 }.sorted() == finished, "each kept row described once")
        for id in finished { #expect(first.finished[id]?.text == describe(first.finished[id]!.record)) }
        described.withLock { $0 = [] }
        #expect(try page() == first)
        #expect(described.withLock { $0 }.isEmpty, "listed again: nothing described again")

        var row = try #require(try journal.loadTask(finished[1]))
        row.description = "renamed"
        try journal.updateTask(row, events: [])
        let after = try page()
        #expect(described.withLock { $0 } == [finished[1]])
        #expect(after.finished[finished[1]]?.text == describe(row))
    }

    @Test func fullItStartsAgainEmpty() {
        let cache = FinishedRowCache()
        let rows = (1...Int64(FinishedRowCache.capacity)).map { id -> TaskRecord in
            var t = Sample.task(name: "t\(id)", state: .completed)
            t.id = id
            return t
        }
        cache.keep(rows.map { FinishedRow(record: $0) })
        #expect(cache.count == FinishedRowCache.capacity)
        var one = Sample.task(name: "one", state: .failed)
        one.id = Int64(FinishedRowCache.capacity) + 1
        cache.keep([FinishedRow(record: one)])
        #expect(cache.count == 1 && cache.rows([one.id!]).count == 1)
    }
}
