// earliestBeginDate in virtual time: a queued task waits outside the queue until its date, across a restart.
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

@Suite struct BeginDateTests {
    typealias T = DaemonStateTests

    static func task(_ id: Int64, begin: Double?) -> ManagedTask {
        var t = T.task(id, session: "a", owner: 1)
        t.record.earliestBeginDate = begin
        return t
    }

    /// A task resumed before its date is queued but not in the queue: nothing starts it, a later task goes
    /// first, and the once-a-second tick lets it in at its date (never before).
    @Test func aTaskWaitsForItsDateThenStarts() throws {
        var state = T.state()
        #expect(try T.resumeAll(&state, [Self.task(1, begin: 100), Self.task(2, begin: nil)], now: 10) == [2])
        #expect(state.tasks[1]?.machine.state == .queued && state.tasks[1]?.deferredUntil == 100)
        #expect(!state.tasks.queue.contains(1), "not in the queue before its date")
        let host = state.tasks[1]!.hostKey
        #expect(state.tasks.queuedByHost[host] == nil, "nor does it keep other tasks of its host from splitting")
        #expect(T.started(state.handle(.clockTick, now: 99.9)).isEmpty)
        #expect(T.started(state.handle(.limitsChanged(T.limits), now: 99.9)).isEmpty)
        #expect(T.started(state.handle(.clockTick, now: 100)) == [1])
        #expect(state.tasks[1]?.deferredUntil == nil)
        #expect(state.tasks.runningByHost[host] == 2 && state.tasks.queuedByHost[host] == nil)
    }

    /// A date that has passed changes nothing; a suspended task waits for nothing; a task restored from the
    /// journal with its date still ahead waits again, and one whose date passed while the daemon was down
    /// starts.
    @Test func pastDatesSuspendedTasksAndRecovery() throws {
        var state = T.state()
        #expect(try T.resumeAll(&state, [Self.task(1, begin: 5)], now: 10) == [1])
        var suspended = Self.task(2, begin: 100)
        _ = state.join([suspended], now: 10)
        #expect(state.tasks[2]?.deferredUntil == nil, "a suspended task is not deferred")

        var restored = T.state()
        suspended.record.state = .queued
        suspended.machine = TaskStateMachine(state: .queued)
        suspended.record.queueOrder = 7
        _ = restored.handle(.taskRestored(suspended.record), now: 50)
        #expect(restored.tasks[2]?.deferredUntil == 100 && !restored.tasks.queue.contains(2))
        #expect(T.started(restored.handle(.clockTick, now: 100.5)) == [2])

        var late = T.state()
        _ = late.handle(.taskRestored(suspended.record), now: 200)
        #expect(late.tasks[2]?.deferredUntil == nil && late.tasks.queue.contains(2))
    }
}
