import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// A task row whose journal write failed (`rowWriteFailed`), as the state handles it: its events no longer count as
/// waiting for an acknowledgement, and the row is written again after a wait that doubles with each failure; a
/// finished task's row with its events, and the task back in memory until then.
@Suite("DaemonState: rows written again")
struct DaemonStateRowRewriteTests {
    /// A submitted row's failure, as the runner feeds it (`finished`: the row and its events it carried).
    static func failed(_ id: Int64, session: String, lostEvents: Int, finished: DaemonState.FinishedRow?,
                       rowMissing: Bool = false, journalTakesWrites: Bool = true) -> DaemonState.Input {
        .rowWriteFailed(.init(id: id, session: session, row: finished?.record, payloads: finished?.payloads ?? [],
                              lostEvents: lostEvents, rowMissing: rowMissing, journalTakesWrites: journalTakesWrites))
    }

    static func journals(_ actions: [DaemonState.Action]) -> [TaskRecord] {
        actions.compactMap { if case let .journal(record, _) = $0 { record } else { nil } }
    }

    @Test func aFailedRowIsWrittenAgainAsTheStateHasItAndItsEventsAreNotWaitedFor() {
        var state = DaemonStateTests.state()
        state.tasks[5] = DaemonStateTests.task(5, session: "a", owner: 1)
        _ = state.handle(.eventsJournaled(session: "a", lastSeq: 10, count: 5), now: 0)
        _ = state.handle(Self.failed(5, session: "a", lostEvents: 2, finished: nil), now: 10)
        #expect(state.sessions["a"]?.pendingEvents == 3 && state.pendingEventsByUID[1] == 3)
        #expect(Self.journals(state.handle(.clockTick, now: 10.5)).isEmpty, "not before its wait")
        state.tasks[5]?.record.priority = .high // changed meanwhile: the row written is the state's now
        let again = Self.journals(state.handle(.clockTick, now: 11))
        #expect(again.map(\.id) == [5] && again.first?.priority == .high)
        // No failure came back within the wait: written, and never again.
        #expect(Self.journals(state.handle(.clockTick, now: 12)).isEmpty && state.rowRewrites.isEmpty)
        #expect(Self.journals(state.handle(.clockTick, now: 100)).isEmpty)
    }

    @Test func eachFailureInARowDoublesTheWaitUpToAMinute() {
        var state = DaemonStateTests.state()
        state.tasks[5] = DaemonStateTests.task(5, session: "a", owner: 1)
        var now = 0.0
        for wait in [1.0, 2, 4, 8, 16, 32, 60, 60] {
            _ = state.handle(Self.failed(5, session: "a", lostEvents: 0, finished: nil), now: now)
            #expect(Self.journals(state.handle(.clockTick, now: now + wait - 0.01)).isEmpty, "wait \(wait)")
            #expect(Self.journals(state.handle(.clockTick, now: now + wait)).count == 1, "wait \(wait)")
            now += wait + 0.1 // its failure comes back
        }
    }

    static func finished(_ id: Int64, _ state: TaskState = .completed, createdAt: Double = 0) -> TaskRecord {
        var record = DaemonStateTests.task(id, session: "a", owner: 1).record
        record.state = state
        record.location = "/d/\(id)"
        record.createdAt = createdAt
        return record
    }

    @Test func aFinishedRowIsWrittenAgainWithItsEventsAndItsTaskIsBackMeanwhile() throws {
        var state = DaemonStateTests.state()
        let record = Self.finished(7)
        let payloads: [EventPayload] = [.stateChanged(state: .completed, previous: .running, reason: nil)]
        _ = state.handle(.finishedTasksCounted(["a": [.completed: 1]]), now: 0) // evicted when its row was submitted
        _ = state.handle(Self.failed(7, session: "a", lostEvents: 1,
                                         finished: .init(record: record, payloads: payloads)), now: 1)
        #expect(state.tasks[7]?.machine.state == .completed && state.tasks[7]?.owner == 1, "described from memory")
        #expect(state.tasks.finishedCounts(session: "a").isEmpty, "counted once: in memory")
        #expect(state.handle(.clockTick, now: 2).contains(.journal(record, payloads)))
        #expect(state.tasks[7] != nil, "still described from memory until the rewrite counts as written")
        // It failed again: written again after twice the wait.
        _ = state.handle(Self.failed(7, session: "a", lostEvents: 1,
                                         finished: .init(record: record, payloads: payloads)), now: 2.5)
        #expect(!state.handle(.clockTick, now: 4.4).contains(.journal(record, payloads)))
        #expect(state.handle(.clockTick, now: 4.5).contains(.journal(record, payloads)), "the same events, once")
        // No failure within its wait: written, and the task lives in the journal only again.
        _ = state.handle(.clockTick, now: 8.5)
        #expect(state.tasks[7] == nil && state.tasks.finishedCounts(session: "a") == [.completed: 1])
        #expect(state.rowRewrites.isEmpty)
    }

    /// A canceled task's row with its events fails while its transfer stops, then its last row (no events) fails
    /// too: the rewrite is the last row, with the first one's events.
    @Test func twoFailedFinishedRowsKeepTheLaterRowAndTheEarlierEvents() {
        var state = DaemonStateTests.state()
        var first = Self.finished(7, .canceled)
        first.durableRanges = ByteRanges(prefix: 10)
        var last = first
        last.durableRanges = ByteRanges(prefix: 20)
        let events: [EventPayload] = [.stateChanged(state: .canceled, previous: .running, reason: nil)]
        state.tasks[7] = ManagedTask(row: first, owner: 1) // still stopping: in memory
        _ = state.handle(Self.failed(7, session: "a", lostEvents: 1, finished: .init(record: first, payloads: events)), now: 0)
        state.tasks[7] = nil // its last row was written (submitted) and it left memory
        _ = state.handle(Self.failed(7, session: "a", lostEvents: 0, finished: .init(record: last, payloads: [])), now: 0.5)
        #expect(state.tasks[7]?.record == last)
        #expect(state.handle(.clockTick, now: 2.5).contains(.journal(last, events)))
    }

    @Test func whatIsNotWrittenAgain() {
        var state = DaemonStateTests.state()
        // A row that does not exist (its insert failed: the runner gives no finished row) of a task not in memory.
        _ = state.handle(Self.failed(8, session: "a", lostEvents: 1, finished: nil), now: 0)
        // A task of an earlier session of the same name (invalidated and opened again since).
        var old = Self.finished(9, createdAt: 1)
        old.session = "b"
        state.sessions["b"]?.record.createdAt = 5
        _ = state.handle(Self.failed(9, session: "b", lostEvents: 0, finished: .init(record: old, payloads: [])), now: 5)
        #expect(state.tasks[8] == nil && state.tasks[9] == nil && state.rowRewrites.isEmpty)
        // A session removed drops its rewrites.
        _ = state.handle(Self.failed(7, session: "a", lostEvents: 0, finished: .init(record: Self.finished(7), payloads: [])), now: 6)
        _ = state.handle(.sessionInvalidating("a", cancelTasks: false), now: 6)
        _ = state.handle(.invalidationFinished("a", deletedTokens: 0), now: 6)
        #expect(state.rowRewrites.isEmpty)
        #expect(Self.journals(state.handle(.clockTick, now: 100)).isEmpty)
    }

    /// A journal that takes no more writes (closed, or a failed fsync) gets no rewrite: it could never succeed, and
    /// one tried every minute would keep the daemon from ever being idle. The lost events still stop counting, and a
    /// finished task stays in memory, described as finished.
    @Test func aJournalThatTakesNoWritesGetsNoRewrite() {
        var state = DaemonStateTests.state()
        state.tasks[5] = DaemonStateTests.task(5, session: "a", owner: 1)
        _ = state.handle(.eventsJournaled(session: "a", lastSeq: 10, count: 5), now: 0)
        _ = state.handle(Self.failed(5, session: "a", lostEvents: 2, finished: nil, journalTakesWrites: false), now: 1)
        let record = Self.finished(7)
        _ = state.handle(Self.failed(7, session: "a", lostEvents: 1, finished: .init(record: record, payloads: []),
                                     journalTakesWrites: false), now: 1)
        #expect(state.sessions["a"]?.pendingEvents == 2 && state.pendingEventsByUID[1] == 2)
        #expect(state.rowRewrites.isEmpty && state.isIdle)
        // The finished task is still described as finished (the journal has an older row of it), counted once.
        #expect(state.tasks[7]?.machine.state == .completed && state.tasks.count(in: .completed) == 1)
        #expect(Self.journals(state.handle(.clockTick, now: 100)).isEmpty)
        // A finished row whose insert failed (the journal has no such row) is not brought back either.
        _ = state.handle(Self.failed(8, session: "a", lostEvents: 0, finished: .init(record: Self.finished(8), payloads: []),
                                     rowMissing: true), now: 2)
        #expect(state.rowRewrites.isEmpty && state.tasks[8] == nil)
    }

    /// A row the journal would not even take (`unsent`): its events go out live now (`deliver`, in their order),
    /// except the journaled ones of a finished row kept to be written again, which go out with the rewrite.
    @Test func theEventsOfARowNeverSubmittedAreDeliveredUnlessItsRewriteCarriesThem() {
        let progress = EventPayload.didWriteData(bytesWritten: 1, totalBytesWritten: 9, totalBytesExpectedToWrite: 9)
        let done = EventPayload.stateChanged(state: .completed, previous: .running, reason: nil)
        func delivered(_ actions: [DaemonState.Action]) -> [EventPayload] {
            actions.compactMap { if case let .deliver(_, _, payload) = $0 { payload } else { nil } }
        }
        func unsent(_ record: TaskRecord, takesWrites: Bool = true) -> DaemonState.Input {
            .rowWriteFailed(.init(id: record.id!, session: "a", row: record, payloads: [progress, done], unsent: true,
                                  journalTakesWrites: takesWrites))
        }
        var state = DaemonStateTests.state()
        state.tasks[5] = DaemonStateTests.task(5, session: "a", owner: 1)
        var running = state.tasks[5]!.record
        running.state = .running
        #expect(delivered(state.handle(unsent(running), now: 0)) == [progress, done], "a row still running: all")
        let finished = Self.finished(7)
        #expect(delivered(state.handle(unsent(finished), now: 0)) == [progress], "the rest go with the rewrite")
        #expect(state.handle(.clockTick, now: 1).contains(.journal(finished, [progress, done])))
        #expect(delivered(state.handle(unsent(Self.finished(8), takesWrites: false), now: 2)) == [progress, done],
                "no rewrite would carry them")
        var old = Self.finished(9, createdAt: 1)
        old.session = "b"
        state.sessions["b"]?.record.createdAt = 5
        let earlier = DaemonState.Input.rowWriteFailed(.init(id: 9, session: "b", row: old, payloads: [done], unsent: true))
        #expect(delivered(state.handle(earlier, now: 3)) == [done], "of an earlier session of the name: not kept")
    }

    @Test func shutdownWritesEveryRowWaitingToBeWrittenAgain() {
        var state = DaemonStateTests.state()
        let record = Self.finished(7)
        _ = state.handle(Self.failed(7, session: "a", lostEvents: 0, finished: .init(record: record, payloads: [])), now: 0)
        _ = state.handle(.shutdownBegan, now: 0.1)
        #expect(Self.journals(state.handle(.clockTick, now: 5)).isEmpty, "nothing from the ticks while shutting down")
        #expect(state.handle(.shutdownGraceEnded, now: 5).contains(.journal(record, [])))
    }

    /// An admitted create's resume data partial that the runner could not move: the token's partial goes, and a
    /// withdrawn batch has nothing of it to remove.
    @Test func aResumePartialNotMovedIsRemovedAndNotWithdrawn() {
        var state = DaemonStateAdmissionTests.state()
        _ = state.handle(.admitting(DaemonStateResumeAdmissionTests.resuming(length: 300)), now: 0)
        #expect(state.handle(.resumePartialNotMoved(partial: "/d/.old.partial", into: "/d/.file.partial"), now: 0)
                == [.removePartial(path: "/d/.old.partial")])
        #expect(state.handle(.admissionsWithdrawn, now: 1).isEmpty)
    }
}
