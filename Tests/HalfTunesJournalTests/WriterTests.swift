import Foundation
import HalfTunesProtocol
import Testing
@testable import HalfTunesJournal

/// The journal's one writer: writes in submission order, gathered into one transaction; submitted writes
/// numbered at once, seen by every later read, durable with the next fsync; a failing one alone.
@Suite struct WriterTests {
    /// Failure messages of submitted writes, from the writer's thread.
    final class Failures: @unchecked Sendable {
        private let lock = NSLock()
        private var list: [String] = []
        func add(_ s: String) { lock.lock(); list.append(s); lock.unlock() }
        var values: [String] { lock.lock(); defer { lock.unlock() }; return list }
    }

    @Test func submittedWritesAreGatheredIntoOneTransactionInOrder() throws {
        try withTemporaryDirectory { dir in
            let journal = try Journal(path: dir + "/journal.sqlite")
            try journal.upsertSession(Sample.session())
            var task = try journal.insertTask(Sample.task(), events: []).0
            let before = journal.writeCounts
            journal.writer.holdForTesting(true)
            var seqs: [Int64] = []
            for state in [TaskState.queued, .running, .suspended] {
                task.state = state
                let events = try journal.submitTaskUpdate(task, events: [Sample.stateChanged(task: task.id, to: state, from: nil)])
                seqs += events.compactMap(\.seq)
            }
            try journal.submitCheckpoint(task: task.id!, durable: ByteRanges(prefix: 4096), head: nil)
            let ticket = journal.durability.lastCommit
            #expect(!journal.durability.isDurable(ticket)) // nothing is written while the writer is held
            // The events were numbered when submitted, in order, before anything was written.
            #expect(seqs.count == 3 && seqs == seqs.sorted() && Set(seqs).count == 3)
            journal.writer.holdForTesting(false)
            journal.sync()
            #expect(journal.durability.isDurable(ticket))
            let after = journal.writeCounts
            #expect(after.transactions == before.transactions + 1 && after.writes == before.writes + 4)
            // The last write wins, as submitted; the events are there with the seqs they were given.
            let stored = try #require(try journal.loadTask(task.id!))
            #expect(stored.state == .suspended && stored.bytesDurable == 4096)
            #expect(try journal.events(session: task.session, after: 0, limit: 10).compactMap(\.seq) == seqs)
        }
    }

    /// A read waits for every write submitted before it; a blocking write comes after the submitted ones.
    @Test func readsSeeEverySubmittedWrite() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        var task = try journal.insertTask(Sample.task(), events: []).0
        for n in 1...200 {
            task.bytesDurable = Int64(n)
            _ = try journal.submitTaskUpdate(task, events: [])
            #expect(try journal.loadTask(task.id!)?.bytesDurable == Int64(n))
        }
        try journal.submitCheckpoint(task: task.id!, durable: ByteRanges(prefix: 999), head: nil)
        try journal.recordCheckpoint(task: task.id!, bytesDurable: 1000)
        #expect(try journal.loadTask(task.id!)?.bytesDurable == 1000)
    }

    /// A submitted write that fails (its task is gone) is reported and takes nothing else with it, even in the
    /// same transaction; checks that can be made at once still throw at once.
    @Test func aFailingSubmittedWriteFailsAlone() throws {
        let journal = try Journal.openInMemory()
        let failures = Failures()
        journal.onSubmittedWriteFailure { failures.add($0) }
        try journal.upsertSession(Sample.session())
        var task = try journal.insertTask(Sample.task(), events: []).0
        var ghost = task
        ghost.id = 4_242
        journal.writer.holdForTesting(true)
        task.state = .queued
        _ = try journal.submitTaskUpdate(task, events: [])
        _ = try journal.submitTaskUpdate(ghost, events: [Sample.stateChanged(task: 4_242, to: .queued, from: nil)])
        try journal.submitCheckpoint(task: task.id!, durable: ByteRanges(prefix: 77), head: nil)
        journal.writer.holdForTesting(false)
        journal.waitUntilWritten()
        #expect(failures.values == [JournalError.unknownTask(4_242).description])
        let stored = try #require(try journal.loadTask(task.id!))
        #expect(stored.state == .queued && stored.bytesDurable == 77)
        #expect(try journal.events(session: task.session, after: 0, limit: 10).isEmpty) // the ghost's event too
        var noID = task
        noID.id = nil
        #expect(throws: JournalError.taskHasNoID) { try journal.submitTaskUpdate(noID, events: []) }
        try journal.close()
        #expect(throws: JournalError.closed) { try journal.submitCheckpoint(task: 1, durable: ByteRanges(prefix: 1), head: nil) }
    }

    /// Seqs are handed out by the writer, never one that was used before: not after acknowledged events were
    /// pruned, nor after the journal is opened again.
    @Test func seqsAreNeverReused() throws {
        try withTemporaryDirectory { dir in
            var journal = try Journal(path: dir + "/journal.sqlite")
            try journal.upsertSession(Sample.session())
            let first = try journal.appendEvents((0..<3).map { _ in Sample.stateChanged(to: .queued, from: nil) })
            let last = try #require(first.last?.seq)
            _ = try journal.ack(session: "com.example.app", through: last) // pruned: none is left
            try journal.close()
            journal = try Journal(path: dir + "/journal.sqlite")
            let next = try journal.appendEvents([Sample.stateChanged(to: .queued, from: nil)])
            #expect(next.first?.seq == last + 1)
        }
    }
}
