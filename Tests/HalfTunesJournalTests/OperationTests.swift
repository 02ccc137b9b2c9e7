import Foundation
import HalfTunesProtocol
import Testing
@testable import HalfTunesJournal

/// `Journal.writing`: the journal's waited writes and reads, run on the writer's thread in their turn (after the
/// writes submitted before, before those submitted after), awaited without blocking a thread.
@Suite struct OperationTests {
    @Test func anOperationRunsInItsTurnBetweenSubmittedWrites() async throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        var task = try journal.insertTask(Sample.task(), events: []).0
        let id = try #require(task.id)
        journal.writer.holdForTesting(true)
        task.bytesDurable = 10
        _ = try journal.submitTaskUpdate(task, events: [])
        async let seen: Int64? = journal.writing { j -> Int64? in
            var session = Sample.session()
            session.configuration.requestTimeout = 99
            try j.upsertSession(session) // a waited write, inside: written there and then
            return try j.loadTask(id)?.bytesDurable
        }
        // Wait until the operation is queued, then submit a write after it.
        while journal.writer.queuedCount < 2 { await Task.yield() }
        task.bytesDurable = 20
        _ = try journal.submitTaskUpdate(task, events: [])
        let before = journal.writeCounts.transactions
        journal.writer.holdForTesting(false)
        #expect(try await seen == 10, "the operation sees the write before it and not the one after")
        #expect(try journal.loadTask(id)?.bytesDurable == 20)
        #expect(try journal.loadSessions().first?.configuration.requestTimeout == 99)
        #expect(journal.writeCounts.transactions == before + 3) // the write before, the operation's, the write after
    }

    @Test func aFailingOperationThrowsToItsCallerAndNothingElseFails() async throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        await #expect(throws: JournalError.self) {
            try await journal.writing { try $0.ack(session: "no.such.session", through: 1) }
        }
        let (task, _) = try journal.insertTask(Sample.task(), events: [])
        #expect(try await journal.writing { try $0.loadTask(task.id!) } == task)
    }

    @Test func aSubmittedOperationsFailureIsReported() async throws {
        let journal = try Journal.openInMemory()
        let reported = Reported()
        journal.onSubmittedWriteFailure { reported.add($0) }
        journal.submitting { _ = try $0.ack(session: "no.such.session", through: 1) }
        journal.waitUntilWritten()
        #expect(reported.messages.count == 1)
    }

    @Test func afterCloseAnOperationThrowsClosed() async throws {
        let journal = try Journal.openInMemory()
        try journal.close()
        await #expect(throws: JournalError.closed) { try await journal.writing { try $0.loadSessions() } }
    }

    @Test func anOperationIsDurableOnceAwaited() async throws {
        try await withTemporaryDirectoryAsync { dir in
            let journal = try Journal(path: dir + "/journal.sqlite")
            try await journal.writing { try $0.upsertSession(Sample.session()) }
            let ticket = journal.durability.lastCommit
            journal.sync()
            #expect(journal.durability.isDurable(ticket))
            try journal.close()
            let reopened = try Journal(path: dir + "/journal.sqlite")
            #expect(try reopened.loadSessions().map(\.identifier) == [Sample.session().identifier])
            try reopened.close()
        }
    }

    final class Reported: @unchecked Sendable {
        private let lock = NSLock()
        private var list: [String] = []
        func add(_ m: String) { lock.lock(); list.append(m); lock.unlock() }
        var messages: [String] { lock.lock(); defer { lock.unlock() }; return list }
    }
}
