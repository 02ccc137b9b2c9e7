import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// A task row whose journal write failed (`rowWriteFailed`), as the state handles it: its events no longer count as
/// waiting for an acknowledgement, and the row is written again after a wait that doubles with each failure; a
/// finished task's row with its events, and the task back in memory until then.
@Suite("DaemonState: rows written again")
struct DaemonStateRowRewriteTests {
    static func journals(_ actions: [DaemonState.Action]) -> [TaskRecord] {
        actions.compactMap { if case let .journal(record, _) = $0 { record } else { nil } }
    }

    @Test func aFailedRowIsWrittenAgainAsTheStateHasItAndItsEventsAreNotWaitedFor() {
        var state = DaemonStateTests.state()
        state.tasks[5] = DaemonStateTests.task(5, session: "a", owner: 1)
        _ = state.handle(.eventsJournaled(session: "a", lastSeq: 10, count: 5), now: 0)
        _ = state.handle(.rowWriteFailed(5, session: "a", lostEvents: 2, finished: nil), now: 10)
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
            _ = state.handle(.rowWriteFailed(5, session: "a", lostEvents: 0, finished: nil), now: now)
            #expect(Self.journals(state.handle(.clockTick, now: now + wait - 0.01)).isEmpty, "wait \(wait)")
            #expect(Self.journals(state.handle(.clockTick, now: now + wait)).count == 1, "wait \(wait)")
            now += wait + 0.1 // its failure comes back
        }
    }

    @Test func aFinishedRowIsWrittenAgainWithItsEventsAndItsTaskIsBackMeanwhile() throws {
        var state = DaemonStateTests.state()
        var record = DaemonStateTests.task(7, session: "a", owner: 1).record
        record.state = .completed
        record.location = "/d/7"
        let payloads: [EventPayload] = [.stateChanged(state: .completed, previous: .running, reason: nil)]
        _ = state.handle(.finishedTasksCounted(["a": [.completed: 1]]), now: 0) // evicted when its row was submitted
        _ = state.handle(.rowWriteFailed(7, session: "a", lostEvents: 1,
                                         finished: .init(record: record, payloads: payloads)), now: 1)
        #expect(state.tasks[7]?.machine.state == .completed && state.tasks[7]?.owner == 1, "described from memory")
        #expect(state.tasks.finishedCounts(session: "a").isEmpty, "counted once: in memory")
        let actions = state.handle(.clockTick, now: 2)
        #expect(actions.contains(.journal(record, payloads)))
        #expect(state.tasks[7] == nil && state.tasks.finishedCounts(session: "a") == [.completed: 1], "in the journal only again")
        // It failed again: back in memory, written again after twice the wait.
        _ = state.handle(.rowWriteFailed(7, session: "a", lostEvents: 1,
                                         finished: .init(record: record, payloads: payloads)), now: 2.5)
        #expect(state.tasks[7] != nil)
        #expect(!state.handle(.clockTick, now: 4.4).contains(.journal(record, payloads)))
        #expect(state.handle(.clockTick, now: 4.5).contains(.journal(record, payloads)))
    }

    @Test func aRowOfASessionGoneIsNotWrittenAgain() {
        var state = DaemonStateTests.state()
        var record = DaemonStateTests.task(7, session: "a", owner: 1).record
        record.state = .failed
        _ = state.handle(.rowWriteFailed(7, session: "a", lostEvents: 0, finished: .init(record: record, payloads: [])), now: 0)
        state.tasks[7] = nil
        state.sessions["a"] = nil
        _ = state.handle(.rowWriteFailed(8, session: "b", lostEvents: 0, finished: nil), now: 0) // never in memory
        #expect(Self.journals(state.handle(.clockTick, now: 5)).isEmpty && state.rowRewrites.isEmpty)
    }
}
