import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// A created task joins the state while its row is still being inserted (`inserting`): it takes its
/// destination, place and counts at once, starts no transfer until `createsJournaled`, and leaves the state as
/// if never created when the insert failed.
@Suite("DaemonState: creates whose rows are being written")
struct DaemonStateCreateTests {
    typealias T = DaemonStateTests

    static func inserting(_ id: Int64, session: String = "a", owner: UInt32 = 1, queued: Bool) -> ManagedTask {
        var t = T.task(id, session: session, owner: owner)
        if queued {
            t.machine = TaskStateMachine.created(start: true, resourceDeadline: nil).0
            t.record.state = .queued
            t.record.queueOrder = id
        }
        t.inserting = true
        return t
    }

    @Test func aQueuedCreateStartsOnlyOnceItsRowIsWritten() {
        var state = T.state()
        #expect(T.started(state.join([Self.inserting(1, queued: true), Self.inserting(2, queued: true)], now: 0)).isEmpty)
        #expect(state.tasks[1]?.machine.state == .queued && state.tasks.queue.count == 0)
        #expect(state.tasks.isReserved("/d/1") && state.tasks.unfinished(session: "a") == 2)
        #expect(state.hold(state.tasks[1]!, position: nil)?.reason == "queue")
        #expect(T.started(state.handle(.createsJournaled([1, 2], failed: false), now: 0)) == [1, 2])
        #expect(state.tasks[1]?.inserting == false && state.tasks.running == [1, 2])
    }

    @Test func aResumeWhileTheRowIsBeingWrittenWaitsForIt() {
        var state = T.state()
        _ = state.join([Self.inserting(1, queued: false)], now: 0)
        let resumed = state.handle(.task(1, .resume), now: 0)
        #expect(T.started(resumed).isEmpty && state.tasks[1]?.machine.state == .queued)
        #expect(T.journaled(resumed, 1) == [.stateChanged(state: .queued, previous: .suspended, reason: nil)])
        #expect(T.started(state.handle(.createsJournaled([1], failed: false), now: 0)) == [1])
    }

    @Test func aFailedInsertTakesTheTasksBackOut() {
        var state = T.state()
        var withResumeData = Self.inserting(2, queued: true)
        withResumeData.record.durableRanges = ByteRanges(prefix: 10)
        _ = state.join([Self.inserting(1, queued: true), withResumeData], now: 0)
        let order = state.nextQueueOrder
        let actions = state.handle(.createsJournaled([1, 2], failed: true), now: 0)
        #expect(state.tasks[1] == nil && state.tasks[2] == nil)
        #expect(!state.tasks.isReserved("/d/1") && state.tasks.unfinished(session: "a") == 0 && state.tasks.unfinished(owner: 1) == 0)
        #expect(state.tasks.count(in: .queued) == 0)
        #expect(T.started(actions).isEmpty)
        // The partial the resume data brought is removed; no journal action (the journal holds nothing of them).
        #expect(actions.contains { if case .removePartial(let path) = $0 { path == "/d/.2.partial" } else { false } })
        #expect(!actions.contains { if case .journal = $0 { true } else { false } })
        #expect(state.nextQueueOrder == order) // places are never handed out twice
    }

    @Test func anOutcomeForATaskThatEndedMeanwhileChangesNothing() {
        var state = T.state()
        _ = state.join([Self.inserting(1, queued: false)], now: 0)
        _ = state.handle(.task(1, .cancel(keepPartial: false)), now: 0)
        #expect(state.tasks[1] == nil) // finished: in the journal only
        #expect(state.handle(.createsJournaled([1], failed: false), now: 0).isEmpty)
    }

    @Test func theEventsOfAFailedInsertNoLongerWaitForAnAcknowledgement() {
        var state = T.state()
        _ = state.join([Self.inserting(1, queued: true)], now: 0)
        _ = state.handle(.eventsJournaled(session: "a", lastSeq: 7, count: 2), now: 0) // as the create's broadcast counts them
        _ = state.handle(.eventsJournaled(session: "a", lastSeq: 9, count: 1), now: 0) // another task's
        _ = state.handle(.createsJournaled([1], failed: true, lostEvents: ["a": 2]), now: 0)
        #expect(state.sessions["a"]?.pendingEvents == 1)
        #expect(state.pendingEventsByUID[1] == 1)
    }
}

