import Foundation
import HalfTunesCore
import HalfTunesProtocol
import Testing
@testable import HalfTunesJournal

/// `Journal.reading`: a read queued behind the writes submitted before it, run on the writer's thread, so the
/// caller never blocks; it sees those writes (and may see later ones written in the same batch), and ends (with
/// `closed`) at close.
@Suite struct NonblockingReadTests {
    @Test func aQueuedReadSeesTheWritesBeforeItAndDoesNotCutTheBatch() async throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        var task = try journal.insertTask(Sample.task(), events: []).0
        let id = try #require(task.id)
        journal.writer.holdForTesting(true) // nothing written yet: the read must wait for the first update
        task.bytesDurable = 10
        _ = try journal.submitTaskUpdate(task, events: [])
        // What `reading` queues, queued here so that the next update is surely submitted after it.
        let seen = Seen()
        journal.writer.read { seen.set(Result { try journal.loadTask(id)?.bytesDurable }) }
        task.bytesDurable = 20
        _ = try journal.submitTaskUpdate(task, events: [])
        let before = journal.writeCounts.transactions
        journal.writer.holdForTesting(false)
        // The writes around the read went in one transaction, the read after it: it sees the write submitted
        // before it (and the later one, written with it).
        #expect(try seen.wait().get() == 20)
        #expect(journal.writeCounts.transactions == before + 1)
        #expect(try await journal.reading { try $0.loadTask(id)?.bytesDurable } == 20)
    }

    final class Seen: @unchecked Sendable {
        private let done = DispatchSemaphore(value: 0)
        private var value: Result<Int64?, Error>?
        func set(_ v: Result<Int64?, Error>) { value = v; done.signal() }
        func wait() -> Result<Int64?, Error> { done.wait(); return value! }
    }

    /// A blocking read on another thread waits for the writer while the writer runs queued reads: neither holds
    /// a lock the other needs (the gate counts calls; it held its lock across them before).
    @Test func blockingAndQueuedReadsDoNotWaitForEachOther() async throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        let task = try journal.insertTask(Sample.task(), events: []).0
        let id = try #require(task.id)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { [task] in
                var task = task
                for n in 1...300 {
                    task.bytesDurable = Int64(n)
                    _ = try journal.submitTaskUpdate(task, events: [])
                    #expect(try journal.loadTask(id)?.bytesDurable == Int64(n)) // blocking, from this thread
                }
            }
            for _ in 1...300 {
                group.addTask { _ = try await journal.reading { try $0.loadTask(id) } }
            }
            try await group.waitForAll()
        }
        #expect(try await journal.reading { try $0.loadTask(id)?.bytesDurable } == 300)
    }

    /// A read queued when the journal closes ends with `closed` instead of never; one queued after, at once.
    @Test func readsEndWithClosedAtClose() async throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        journal.writer.holdForTesting(true)
        async let queued: [SessionRecord] = journal.reading { try $0.loadSessions() }
        journal.writer.holdForTesting(false)
        try journal.close()
        // Queued before close: it ran before the writer stopped, or found the journal closed; never hangs.
        do {
            #expect(try await queued.count == 1)
        } catch {
            #expect(error as? JournalError == .closed)
        }
        await #expect(throws: JournalError.closed) { try await journal.reading { try $0.loadSessions() } }
    }

    /// A queued read runs on the writer's own thread (where a write would wait for itself: `write` refuses it
    /// by a precondition).
    @Test func aQueuedReadRunsOnTheWritersThread() async throws {
        let journal = try Journal.openInMemory()
        #expect(!journal.writer.onWriterThread)
        #expect(try await journal.reading { $0.writer.onWriterThread })
    }
}
