import Foundation
import HalfTunesProtocol
import Testing
@testable import HalfTunesJournal

@Suite struct EventTests {
    static let a = "com.example.a"
    static let b = "com.example.b"

    func journalWithTwoSessions() throws -> (Journal, taskA: Int64, taskB: Int64) {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session(Self.a))
        try journal.upsertSession(Sample.session(Self.b))
        let taskA = try journal.insertTask(Sample.task(session: Self.a), events: []).0.id!
        let taskB = try journal.insertTask(Sample.task(session: Self.b), events: []).0.id!
        return (journal, taskA, taskB)
    }

    @Test func everyJournaledPayloadRoundTrips() throws {
        let (journal, task, _) = try journalWithTwoSessions()
        let payloads: [EventPayload] = [
            .stateChanged(state: .queued, previous: .suspended, reason: nil),
            .stateChanged(state: .waiting, previous: .running,
                          reason: TaskError(code: TaskErrorCode.httpStatus, message: "503", httpStatus: 503)),
            .didResumeAtOffset(offset: 0, expectedTotalBytes: nil, discardedBytes: 4_096, reason: "validator changed"),
            .didResumeAtOffset(offset: 8_192, expectedTotalBytes: 65_536, discardedBytes: nil, reason: nil),
            .didFinishDownloading(location: "/home/u/Downloads/big.iso"),
            .didComplete(error: nil),
            .didComplete(error: TaskError(code: TaskErrorCode.canceled, message: "canceled")),
        ]
        let input = payloads.map { Event(seq: nil, session: Self.a, task: task, time: "2025-11-22T03:51:27.125Z", payload: $0) }
        let stored = try journal.appendEvents(input)
        #expect(stored.map { Event(seq: nil, session: $0.session, task: $0.task, time: $0.time, payload: $0.payload) } == input)
        #expect(try journal.events(session: Self.a, after: 0) == stored)
    }

    @Test func liveOnlyEventsAreRejected() throws {
        let (journal, task, _) = try journalWithTwoSessions()
        let live: [EventPayload] = [
            .didWriteData(bytesWritten: 1, totalBytesWritten: 1, totalBytesExpectedToWrite: nil),
            .didFinishEvents(through: 3),
            .didBecomeInvalid,
        ]
        for payload in live {
            let event = Event(seq: nil, session: Self.a, task: task, time: "", payload: payload)
            #expect(throws: JournalError.notJournaled(type: payload.type)) { try journal.appendEvents([event]) }
            var record = try #require(try journal.loadTask(task))
            record.state = .running
            #expect(throws: JournalError.notJournaled(type: payload.type)) { try journal.updateTask(record, events: [event]) }
        }
        #expect(try journal.events(session: Self.a, after: 0).isEmpty)
        #expect(try journal.loadTask(task)?.state == .suspended)
    }

    @Test func eventsAreOrderedAndIsolatedPerSession() throws {
        let (journal, taskA, taskB) = try journalWithTwoSessions()
        var all: [Event] = []
        for round in 0..<3 {
            all += try journal.appendEvents([
                Sample.stateChanged(session: Self.a, task: taskA, to: .queued, from: .suspended),
                Sample.stateChanged(session: Self.b, task: taskB, to: .running, from: .queued),
            ])
            all += try journal.appendEvents([Sample.stateChanged(session: Self.a, task: nil, to: .suspended, from: .queued)])
            #expect(all.count == (round + 1) * 3)
        }
        let seqs = all.map(\.seq!)
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count)

        let eventsA = try journal.events(session: Self.a, after: 0)
        #expect(eventsA == all.filter { $0.session == Self.a })
        #expect(eventsA.count == 6)
        let eventsB = try journal.events(session: Self.b, after: 0)
        #expect(eventsB == all.filter { $0.session == Self.b })

        let middle = eventsA[2].seq!
        #expect(try journal.events(session: Self.a, after: middle) == Array(eventsA[3...]))
        #expect(try journal.events(session: Self.a, after: eventsA.last!.seq!).isEmpty)
        #expect(try journal.lastEventSeq(session: Self.a) == eventsA.last!.seq!)
        #expect(try journal.lastEventSeq(session: Self.b) == eventsB.last!.seq!)
        #expect(try journal.lastEventSeq(session: "never") == 0)
        #expect(try journal.events(session: "never", after: 0).isEmpty)
    }

    @Test func eventsNeedAnExistingSessionAndAMatchingTask() throws {
        let (journal, taskA, _) = try journalWithTwoSessions()
        #expect(throws: JournalError.unknownSession("ghost")) {
            try journal.appendEvents([Sample.stateChanged(session: "ghost", to: .queued, from: nil)])
        }
        #expect(throws: JournalError.eventSessionMismatch(task: Self.a, event: Self.b)) {
            try journal.appendEvents([Sample.stateChanged(session: Self.b, task: taskA, to: .queued, from: nil)])
        }
        // One bad event in a batch: none of the batch is written.
        #expect(throws: JournalError.unknownTask(31_337)) {
            try journal.appendEvents([
                Sample.stateChanged(session: Self.a, task: taskA, to: .queued, from: .suspended),
                Sample.stateChanged(session: Self.a, task: 31_337, to: .queued, from: .suspended),
            ])
        }
        #expect(try journal.events(session: Self.a, after: 0).isEmpty)
        #expect(try journal.appendEvents([]).isEmpty)
    }

    @Test func ackPrunesAndLastEventSeqSurvivesPruningAndReopen() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/journal.sqlite"
            var journal = try Journal(path: path)
            try journal.upsertSession(Sample.session(Self.a))
            try journal.upsertSession(Sample.session(Self.b))
            let task = try journal.insertTask(Sample.task(session: Self.a), events: []).0.id!
            let events = try journal.appendEvents((0..<5).map { _ in
                Sample.stateChanged(session: Self.a, task: task, to: .queued, from: .suspended)
            })
            let other = try journal.appendEvents([Sample.stateChanged(session: Self.b, to: .queued, from: nil)])
            let last = events.last!.seq!

            #expect(try journal.ack(session: Self.a, through: events[2].seq!).pruned == 3)
            #expect(try journal.events(session: Self.a, after: 0) == Array(events[3...]))
            #expect(try journal.loadSessions().first { $0.identifier == Self.a }?.ackedThrough == events[2].seq!)
            // Acking an older seq neither lowers acked_through nor deletes anything.
            #expect(try journal.ack(session: Self.a, through: events[0].seq!).pruned == 0)
            #expect(try journal.loadSessions().first { $0.identifier == Self.a }?.ackedThrough == events[2].seq!)
            // The stale in-memory copy of the session (ackedThrough 0) must not undo the ack.
            try journal.upsertSession(Sample.session(Self.a))
            #expect(try journal.loadSessions().first { $0.identifier == Self.a }?.ackedThrough == events[2].seq!)

            #expect(try journal.ack(session: Self.a, through: last).pruned == 2)
            #expect(try journal.events(session: Self.a, after: 0).isEmpty)
            #expect(try journal.lastEventSeq(session: Self.a) == last)
            #expect(try journal.events(session: Self.b, after: 0) == other)
            #expect(throws: JournalError.unknownSession("ghost")) { try journal.ack(session: "ghost", through: 1) }
            try journal.close()

            journal = try Journal(path: path)
            #expect(try journal.lastEventSeq(session: Self.a) == last)
            #expect(try journal.loadSessions().first { $0.identifier == Self.a }?.ackedThrough == last)
            let next = try journal.appendEvents([Sample.stateChanged(session: Self.a, to: .queued, from: nil)])
            #expect(next[0].seq! > other[0].seq!)
            #expect(try journal.lastEventSeq(session: Self.a) == next[0].seq!)
            try journal.close()
        }
    }
}
