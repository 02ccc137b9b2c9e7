// Network and power conditions in virtual time: which sessions' tasks wait, stop, fail or go on, and at what cost.
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

@Suite struct ConditionsStateTests {
    typealias T = DaemonStateTests
    static let limits = DaemonState.SlotLimits(maxConcurrent: 4, maxConnectionsPerHost: 8)
    static let good = SystemConditions(metered: false, online: true, onBattery: false, source: "networkmanager")
    static let metered = SystemConditions(metered: true, online: true, onBattery: false, source: "networkmanager")
    static let offline = SystemConditions(metered: false, online: false, onBattery: false, source: "networkmanager")

    /// "a" may not use a metered network, "b" may, "c" does not wait for connectivity.
    static func state() -> DaemonState {
        T.state(sessions: [("a", 1, SessionConfiguration(allowsExpensiveNetworkAccess: false)), ("b", 1, .init()),
                           ("c", 1, SessionConfiguration(waitsForConnectivity: false))])
    }

    static func stopped(_ actions: [DaemonState.Action]) -> [Int64] {
        actions.compactMap { if case .stopAttempt(let id) = $0 { id } else { nil } }
    }

    /// Metered: "a"'s running transfer stops and its queued task waits (reason networkExpensive, no retry
    /// time, attempts unchanged), and "b" takes the freed slot; unmetered: "a"'s tasks are queued again at
    /// their old places, and the first of them takes the next free slot.
    @Test func meteredStopsAndWaitsThenUnmeteredContinues() throws {
        var state = Self.state()
        let tasks = [T.task(1, session: "a", owner: 1), T.task(2, session: "a", owner: 1), T.task(3, session: "b", owner: 1)]
        #expect(try T.resumeAll(&state, tasks, limits: DaemonState.SlotLimits(maxConcurrent: 1, maxConnectionsPerHost: 8)) == [1])
        let order2 = state.tasks[2]!.record.queueOrder

        let actions = state.handle(.conditionsChanged(Self.metered, serial: 1), now: 10)
        #expect(Self.stopped(actions) == [1])
        for id: Int64 in [1, 2] {
            let m = state.tasks[id]!.machine
            #expect(m.state == .waiting && m.waitingReason?.code == TaskErrorCode.networkExpensive && m.nextAttemptAt == nil)
            #expect(m.isWaitingForConditions)
        }
        #expect(state.tasks[1]?.record.attempts == 1, "no attempt used up")
        #expect(T.started(actions) == [3], "b takes the slot (as after a pause)")
        let ended = state.handle(.attemptEnded(1, .stopped(durableBytes: 100), jitterSample: 0.5), now: 10.2)
        #expect(T.started(ended).isEmpty)
        #expect(state.tasks[1]?.machine.state == .waiting, "a stopped transfer's end does not move a waiting task")
        #expect(state.tasks.earliestRetry == nil || state.tasks.dueRetries(now: 1e9).isEmpty, "no retry time")

        let back = state.handle(.conditionsChanged(Self.good, serial: 2), now: 20)
        #expect(T.journaled(back, 1).contains(.stateChanged(state: .queued, previous: .waiting, reason: nil)))
        #expect(state.tasks[2]?.machine.state == .queued && state.tasks[2]?.record.queueOrder == order2, "its old place")
        #expect(T.started(back).isEmpty, "the slot is b's until its transfer ends")
        let freed = state.handle(.attemptEnded(3, .stopped(durableBytes: 0), jitterSample: 0.5), now: 21)
        #expect(T.started(freed) == [1], "a's first task goes first: it kept its place")
    }

    /// Offline: sessions that wait for connectivity wait with `offline`; "c" (waitsForConnectivity false)
    /// fails its queued task at once and lets its running transfer go on; online again, the waiting ones go on.
    @Test func offlineWaitsOrFailsAtOnce() throws {
        var state = Self.state()
        let tasks = [T.task(1, session: "b", owner: 1), T.task(2, session: "c", owner: 1),
                     T.task(3, session: "c", owner: 1), T.task(4, session: "b", owner: 1)]
        #expect(try T.resumeAll(&state, tasks, limits: DaemonState.SlotLimits(maxConcurrent: 2, maxConnectionsPerHost: 8)) == [1, 2])
        let actions = state.handle(.conditionsChanged(Self.offline, serial: 1), now: 5)
        #expect(Self.stopped(actions) == [1])
        #expect(state.tasks[1]?.machine.waitingReason?.code == TaskErrorCode.offline)
        #expect(state.tasks[4]?.machine.waitingReason?.code == TaskErrorCode.offline)
        #expect(state.tasks[2]?.machine.state == .running, "a running transfer of c goes on: its connection decides")
        #expect(T.completionError(actions, 3)?.code == TaskErrorCode.offline, "c's queued task fails at once")
        #expect(state.tasks[3] == nil, "and leaves memory as every finished task")

        // A task of "c" resumed while offline fails at once too.
        _ = state.join([T.task(5, session: "c", owner: 1)], now: 6)
        let resumed = state.handle(.task(5, .resume), now: 6)
        #expect(T.completionError(resumed, 5)?.code == TaskErrorCode.offline)

        let online = state.handle(.conditionsChanged(Self.good, serial: 2), now: 7)
        #expect(Set(T.started(online)).isSubset(of: [1, 4]) && T.started(online).contains(4))
    }

    /// A task created, resumed, retrying or restored while its session is blocked waits at once; a suspended
    /// one is untouched until resumed; a restart restores a waiting one that the conditions now allow into the
    /// queue.
    @Test func everyWayIntoTheQueueIsGated() throws {
        var state = Self.state()
        _ = state.handle(.conditionsChanged(Self.metered, serial: 1), now: 0)
        var created = T.task(1, session: "a", owner: 1)
        created.machine = TaskStateMachine(state: .queued)
        created.record.state = .queued
        let a1 = state.join([created, T.task(2, session: "a", owner: 1)], now: 1)
        #expect(T.started(a1).isEmpty)
        #expect(state.tasks[1]?.machine.waitingReason?.code == TaskErrorCode.networkExpensive)
        #expect(state.tasks[2]?.machine.state == .suspended)
        #expect(T.started(state.handle(.task(2, .resume), now: 2)).isEmpty)
        #expect(state.tasks[2]?.machine.isWaitingForConditions == true)
        // "retry now" on a waiting task goes back to waiting, with two state changes journaled.
        let retried = state.handle(.task(2, .resume), now: 3)
        #expect(T.journaled(retried, 2).count == 2 && state.tasks[2]?.machine.isWaitingForConditions == true)

        // A task waiting for a retry time is gated when the time comes.
        var b = T.state(sessions: [("a", 1, SessionConfiguration(allowsExpensiveNetworkAccess: false))])
        #expect(try T.resumeAll(&b, [T.task(7, session: "a", owner: 1)]) == [7])
        _ = b.handle(.attemptEnded(7, T.transient(), jitterSample: 0.5), now: 1)
        let retryAt = b.tasks[7]!.machine.nextAttemptAt!
        _ = b.handle(.conditionsChanged(Self.metered, serial: 2), now: 1.5)
        #expect(b.tasks[7]?.machine.nextAttemptAt == retryAt, "a retry time is kept")
        #expect(T.started(b.handle(.retryTimerFired, now: retryAt)).isEmpty)
        #expect(b.tasks[7]?.machine.waitingReason?.code == TaskErrorCode.networkExpensive)

        // Restored with the conditions now allowing it: queued (and started) at once.
        var restarted = Self.state()
        var waiting = T.task(9, session: "a", owner: 1)
        waiting.machine = TaskStateMachine(state: .waiting, waitingReason: TaskError(code: TaskErrorCode.networkExpensive, message: "m"))
        waiting.record.state = .waiting
        waiting.record.waitingReason = waiting.machine.waitingReason // as the journal's row has it
        waiting.record.queueOrder = 3
        let restored = restarted.handle(.taskRestored(waiting.record), now: 50)
        #expect(restarted.tasks[9]?.machine.state == .queued && restarted.tasks[9]?.record.queueOrder == 3)
        #expect(T.journaled(restored, 9) == [.stateChanged(state: .queued, previous: .waiting, reason: nil)])
        // … and still blocked: it keeps waiting, with nothing journaled.
        var still = Self.state()
        _ = still.handle(.conditionsChanged(Self.metered, serial: 3), now: 0)
        #expect(still.handle(.taskRestored(waiting.record), now: 50).isEmpty)
        #expect(still.tasks[9]?.machine.isWaitingForConditions == true && !still.tasks.queue.contains(9))
    }

    /// Reconfiguring a session re-checks its tasks: allowing metered networks releases them, forbidding it
    /// holds them. A change of conditions that does not concern a session costs it no walk over its tasks and
    /// journals nothing.
    @Test func reconfigurationAndUnconcernedSessions() throws {
        var state = Self.state()
        _ = state.handle(.conditionsChanged(Self.metered, serial: 1), now: 0)
        #expect(try T.resumeAll(&state, [T.task(1, session: "a", owner: 1), T.task(2, session: "b", owner: 1)]) == [2])
        let allowed = state.handle(.sessionConfigured("a", SessionConfiguration(allowsExpensiveNetworkAccess: true)), now: 1)
        #expect(T.started(allowed) == [1])
        let forbidden = state.handle(.sessionConfigured("b", SessionConfiguration(allowsExpensiveNetworkAccess: false)), now: 2)
        #expect(Self.stopped(forbidden) == [2])
        // Battery changes nothing for sessions that are not discretionary.
        let battery = SystemConditions(metered: true, online: true, onBattery: true, source: "networkmanager+upower")
        #expect(state.handle(.conditionsChanged(battery, serial: 2), now: 3).isEmpty)
        // A report older than the last one taken (it arrived late) changes nothing.
        #expect(state.handle(.conditionsChanged(Self.good, serial: 1), now: 4).isEmpty)
        #expect(state.reportedConditions == battery && state.conditionsSerial == 2)
    }
}
