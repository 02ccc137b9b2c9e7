import Foundation
import HalfTunesCore
import HalfTunesProtocol
import Testing
@testable import HalfTunesJournal

@Suite struct TaskTests {
    @Test func insertAssignsTheIdAndGivesItToTheEvents() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        let created = Sample.stateChanged(to: .suspended, from: nil)
        let (task, events) = try journal.insertTask(Sample.task(), events: [created])
        let id = try #require(task.id)
        #expect(events.count == 1)
        #expect(events[0].task == id)
        #expect(events[0].seq != nil)
        #expect(try journal.loadTasks() == [task])
        #expect(try journal.events(session: task.session, after: 0) == events)
    }

    @Test func everyFieldRoundTrips() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        let (full, _) = try journal.insertTask(Sample.fullTask(), events: [])
        let (minimal, _) = try journal.insertTask(Sample.task(), events: [])
        var expectedFull = Sample.fullTask()
        expectedFull.id = full.id
        #expect(full == expectedFull)
        #expect(try journal.loadTasks() == [full, minimal])
        #expect(try journal.loadTask(full.id!) == full)
        #expect(try journal.loadTask(999) == nil)
    }

    @Test func insertIsAtomicWithItsEvents() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        // The second event names a task that does not exist: nothing at all may be written.
        let bad = Sample.stateChanged(task: 9_999, to: .queued, from: .suspended)
        #expect(throws: JournalError.unknownTask(9_999)) {
            try journal.insertTask(Sample.task(), events: [Sample.stateChanged(to: .suspended, from: nil), bad])
        }
        #expect(try journal.loadTasks().isEmpty)
        #expect(try journal.events(session: "com.example.app", after: 0).isEmpty)
        #expect(try journal.lastEventSeq(session: "com.example.app") == 0)

        #expect(throws: JournalError.unknownSession("nobody")) {
            try journal.insertTask(Sample.task(session: "nobody"), events: [])
        }
        var withID = Sample.task()
        withID.id = 5
        #expect(throws: JournalError.taskAlreadyHasID(5)) { try journal.insertTask(withID, events: []) }
        #expect(throws: JournalError.eventSessionMismatch(task: "com.example.app", event: "other")) {
            try journal.insertTask(Sample.task(), events: [Sample.stateChanged(session: "other", to: .suspended, from: nil)])
        }
        #expect(try journal.loadTasks().isEmpty)
    }

    @Test func insertingSeveralIsOneTransactionAllOrNone() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        try journal.upsertSession(Sample.session("other"))
        let created = Sample.stateChanged(to: .suspended, from: nil)
        let stored = try journal.insertTasks([
            (Sample.task(name: "1"), [created]),
            (Sample.task(session: "other", name: "2"), [Sample.stateChanged(session: "other", to: .suspended, from: nil)]),
            (Sample.task(name: "3"), [created, Sample.stateChanged(to: .queued, from: .suspended)]),
        ])
        #expect(stored.map { $0.0.destination } == ["1", "2", "3"].map { "/home/u/Downloads/\($0)" })
        let ids = stored.map { $0.0.id! }
        #expect(ids == ids.sorted() && Set(ids).count == 3)
        // Each task's events carry its id and the seqs follow the order given.
        #expect(stored.map { $0.1.map(\.task) } == [[ids[0]], [ids[1]], [ids[2], ids[2]]])
        let seqs = stored.flatMap { $0.1.map { $0.seq! } }
        #expect(seqs == seqs.sorted())
        #expect(try journal.loadTasks().map(\.id) == ids)
        #expect(try journal.events(session: "com.example.app", after: 0).count == 3)

        // One of them cannot be journaled (its session is gone): none of them is.
        #expect(throws: JournalError.unknownSession("nobody")) {
            try journal.insertTasks([(Sample.task(name: "4"), [created]), (Sample.task(session: "nobody", name: "5"), [])])
        }
        #expect(try journal.loadTasks().map(\.id) == ids)
        #expect(try journal.events(session: "com.example.app", after: 0).count == 3)
    }

    @Test func updateReplacesTheRowAndAppendsEventsAtomically() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        let (task, first) = try journal.insertTask(Sample.task(), events: [Sample.stateChanged(to: .suspended, from: nil)])
        let id = try #require(task.id)

        var running = task
        running.state = .running
        running.attempts = 1
        running.etag = "\"v1\""
        running.bytesExpected = 1_000
        running.updatedAt += 2
        let appended = try journal.updateTask(running, events: [
            Sample.stateChanged(task: id, to: .queued, from: .suspended),
            Sample.stateChanged(task: id, to: .running, from: .queued),
        ])
        #expect(appended.map(\.seq!) == [first[0].seq! + 1, first[0].seq! + 2])
        #expect(try journal.loadTasks() == [running])

        // A failing event rolls back the row update too.
        var completed = running
        completed.state = .completed
        #expect(throws: JournalError.unknownTask(77)) {
            try journal.updateTask(completed, events: [Sample.stateChanged(task: 77, to: .completed, from: .running)])
        }
        #expect(try journal.loadTasks() == [running])
        #expect(try journal.events(session: task.session, after: 0).count == 3)

        var missing = running
        missing.id = 12_345
        #expect(throws: JournalError.unknownTask(12_345)) { try journal.updateTask(missing, events: []) }
        var noID = running
        noID.id = nil
        #expect(throws: JournalError.taskHasNoID) { try journal.updateTask(noID, events: []) }
    }

    /// A row update writes every column but the session, which it matches: a task is never moved to another
    /// session, and a record naming another one is refused as a task that does not exist, with nothing written.
    @Test func aRowUpdateNeverMovesATaskToAnotherSession() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        try journal.upsertSession(Sample.session("other"))
        var t = try journal.insertTask(Sample.task(), events: []).0
        t.description = "kept"
        try journal.updateTask(t, events: [])
        var moved = t
        moved.session = "other"
        moved.description = "moved"
        #expect(throws: JournalError.unknownTask(t.id!)) { try journal.updateTask(moved, events: []) }
        let stored = try #require(try journal.loadTask(t.id!))
        #expect(stored.session == "com.example.app" && stored.description == "kept")
    }

    /// A row update's own events need no lookup (its row and session were just written), but an event of
    /// another task in the same write is still checked against that task's session, whatever the order.
    @Test func aRowUpdatesEventsOfAnotherTaskAreStillChecked() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        try journal.upsertSession(Sample.session("other"))
        let (mine, _) = try journal.insertTask(Sample.task(), events: [])
        let (sibling, _) = try journal.insertTask(Sample.task(name: "sibling.iso"), events: [])
        let (theirs, _) = try journal.insertTask(Sample.task(session: "other"), events: [])
        let (a, b, c) = (try #require(mine.id), try #require(sibling.id), try #require(theirs.id))

        var queued = mine
        queued.state = .queued
        let appended = try journal.updateTask(queued, events: [
            Sample.stateChanged(task: a, to: .queued, from: .suspended),
            Sample.stateChanged(task: b, to: .queued, from: .suspended),
            Sample.stateChanged(task: a, to: .running, from: .queued),
        ])
        #expect(appended.map(\.task) == [a, b, a])

        var running = queued
        running.state = .running
        #expect(throws: JournalError.eventSessionMismatch(task: "other", event: "com.example.app")) {
            try journal.updateTask(running, events: [
                Sample.stateChanged(task: a, to: .running, from: .queued),
                Sample.stateChanged(task: c, to: .running, from: .queued),
            ])
        }
        #expect(throws: JournalError.eventSessionMismatch(task: "other", event: "com.example.app")) {
            try journal.updateTask(running, events: [Sample.stateChanged(task: c, to: .running, from: .queued)])
        }
        #expect(try journal.loadTask(a) == queued)
        #expect(try journal.events(session: "com.example.app", after: 0).count == 3)
        #expect(try journal.events(session: "other", after: 0).isEmpty)
    }

    @Test func checkpointUpdatesOnlyTheDurableByteCount() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        let (task, _) = try journal.insertTask(Sample.fullTask(), events: [])
        try journal.recordCheckpoint(task: task.id!, bytesDurable: 123_456_789)
        var expected = task
        expected.bytesDurable = 123_456_789
        #expect(try journal.loadTasks() == [expected])
        #expect(throws: JournalError.unknownTask(4_242)) { try journal.recordCheckpoint(task: 4_242, bytesDurable: 1) }
    }

    /// A checkpoint with the response's head records the validators with the length, and nothing else.
    @Test func checkpointWithAHeadRecordsTheValidatorsWithTheLength() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        let (task, _) = try journal.insertTask(Sample.fullTask(), events: [])
        let head = CheckpointHead(etag: "\"v2\"", lastModified: nil, bytesExpected: 999_999,
                                          currentURL: "https://mirror.example/f.iso")
        try journal.recordCheckpoint(task: task.id!, bytesDurable: 4_096, head: head)
        var expected = task
        expected.bytesDurable = 4_096
        expected.etag = "\"v2\""
        expected.lastModified = nil
        expected.bytesExpected = 999_999
        expected.currentURL = "https://mirror.example/f.iso"
        #expect(try journal.loadTasks() == [expected])
        #expect(throws: JournalError.unknownTask(4_242)) { try journal.recordCheckpoint(task: 4_242, bytesDurable: 1, head: head) }
    }

    @Test func idsAreNeverReusedEvenAcrossReopen() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/journal.sqlite"
            var journal = try Journal(path: path)
            try journal.upsertSession(Sample.session())
            var ids: [Int64] = []
            for name in ["a", "b", "c"] {
                ids.append(try journal.insertTask(Sample.task(name: name), events: []).0.id!)
            }
            let (_, events) = try journal.insertTask(Sample.task(name: "d"), events: [Sample.stateChanged(to: .suspended, from: nil)])
            ids.append(events[0].task!)
            let lastSeq = try #require(events.last?.seq)
            try journal.deleteSession("com.example.app")

            try journal.upsertSession(Sample.session())
            let afterDelete = try journal.insertTask(Sample.task(), events: [Sample.stateChanged(to: .suspended, from: nil)])
            #expect(afterDelete.0.id! > ids.max()!)
            #expect(afterDelete.1[0].seq! > lastSeq)
            ids.append(afterDelete.0.id!)
            try journal.deleteSession("com.example.app")
            try journal.close()

            journal = try Journal(path: path)
            try journal.upsertSession(Sample.session())
            let afterReopen = try journal.insertTask(Sample.task(), events: [Sample.stateChanged(to: .suspended, from: nil)])
            #expect(afterReopen.0.id! > ids.max()!)
            #expect(afterReopen.1[0].seq! > afterDelete.1[0].seq!)
            try journal.close()
        }
    }

    @Test func concurrentCheckpointsAndEventsAllLand() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session())
        let ids = try (0..<8).map { try journal.insertTask(Sample.task(name: "f\($0)"), events: []).0.id! }
        let failures = FailureCounter()
        DispatchQueue.concurrentPerform(iterations: ids.count) { index in
            let id = ids[index]
            for step in 1...50 {
                do {
                    try journal.recordCheckpoint(task: id, bytesDurable: Int64(step * 1_000))
                    if step % 10 == 0 {
                        try journal.appendEvents([Sample.stateChanged(task: id, to: .running, from: .running)])
                    }
                } catch {
                    failures.add()
                }
            }
        }
        #expect(failures.count == 0)
        #expect(try journal.loadTasks().allSatisfy { $0.bytesDurable == 50_000 })
        let events = try journal.events(session: "com.example.app", after: 0)
        #expect(events.count == ids.count * 5)
        #expect(events.map(\.seq!) == events.map(\.seq!).sorted())
        #expect(try journal.lastEventSeq(session: "com.example.app") == events.last!.seq!)
    }
}

final class FailureCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func add() { lock.lock(); value += 1; lock.unlock() }
    var count: Int { lock.lock(); defer { lock.unlock() }; return value }
}
