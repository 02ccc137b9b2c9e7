// The URLSession network and power rules: the gate's verdicts and the task state machine's conditions inputs.
import HalfTunesCore
import HalfTunesProtocol
import Testing

@Suite struct ConditionsGateTests {
    typealias M = TaskStateMachine
    static let good = SystemConditions(metered: false, online: true, onBattery: false, source: "networkmanager+upower")
    static let offline = SystemConditions(metered: false, online: false, onBattery: false, source: "networkmanager")
    static let metered = SystemConditions(metered: true, online: true, onBattery: false, source: "networkmanager")
    static let battery = SystemConditions(metered: false, online: true, onBattery: true, source: "upower")

    static func code(_ c: SessionConfiguration, _ conditions: SystemConditions) -> String? {
        ConditionsGate.block(c, under: conditions)?.reason.code
    }

    /// Defaults (every field nil, as a session journaled before these fields): only offline blocks, and the
    /// tasks wait; each setting blocks only in its own conditions; offline comes first.
    @Test func verdictsFollowTheSessionRules() {
        let plain = SessionConfiguration()
        #expect(Self.code(plain, Self.good) == nil && Self.code(plain, Self.metered) == nil && Self.code(plain, Self.battery) == nil)
        #expect(ConditionsGate.block(plain, under: Self.offline)?.waits == true)
        #expect(Self.code(plain, Self.offline) == TaskErrorCode.offline)

        let noWait = SessionConfiguration(waitsForConnectivity: false)
        #expect(ConditionsGate.block(noWait, under: Self.offline)?.waits == false)
        #expect(Self.code(noWait, Self.offline) == TaskErrorCode.offline)
        #expect(Self.code(noWait, Self.metered) == nil)

        let cheap = SessionConfiguration(allowsExpensiveNetworkAccess: false)
        #expect(Self.code(cheap, Self.metered) == TaskErrorCode.networkExpensive)
        #expect(Self.code(cheap, Self.battery) == nil && Self.code(cheap, Self.good) == nil)
        #expect(Self.code(cheap, SystemConditions(metered: true, online: false, onBattery: false, source: "x")) == TaskErrorCode.offline)

        let discretionary = SessionConfiguration(isDiscretionary: true)
        #expect(Self.code(discretionary, Self.metered) == TaskErrorCode.discretionary)
        #expect(Self.code(discretionary, Self.battery) == TaskErrorCode.discretionary)
        #expect(Self.code(discretionary, Self.good) == nil)
        #expect(Self.code(SessionConfiguration(allowsExpensiveNetworkAccess: true, isDiscretionary: false), Self.metered) == nil)
    }

    static let expensive = TaskError(code: TaskErrorCode.networkExpensive, message: "metered")
    static let offlineError = TaskError(code: TaskErrorCode.offline, message: "offline")

    /// Queued and running tasks wait with the reason, without a retry time or a failure counted; a running
    /// transfer stops; `conditionsAllow` queues them again; a change of reason is reported, the same reason
    /// is not.
    @Test func blockAndAllowWithoutUsingUpRetries() throws {
        var running = M(state: .running, consecutiveFailures: 2)
        #expect(try running.handle(.conditionsBlock(Self.expensive, waits: true), now: 5)
            == [.stopTransfer, .emitStateChanged(from: .running, to: .waiting, reason: Self.expensive)])
        #expect(running.isWaitingForConditions && running.nextAttemptAt == nil && running.consecutiveFailures == 2)
        #expect(try running.handle(.conditionsBlock(Self.expensive, waits: true), now: 6) == [])
        #expect(try running.handle(.retryDue, now: 7) == [], "no retry timer moves it")
        #expect(try running.handle(.conditionsBlock(Self.offlineError, waits: true), now: 8)
            == [.emitStateChanged(from: .waiting, to: .waiting, reason: Self.offlineError)])
        #expect(running.waitingReason == Self.offlineError)
        #expect(try running.handle(.restored, now: 9) == [], "restored, it waits for the daemon to look at the conditions")
        #expect(try running.handle(.conditionsAllow, now: 10) == [.enqueue, .emitStateChanged(from: .waiting, to: .queued, reason: nil)])
        #expect(running.state == .queued && running.waitingReason == nil && running.consecutiveFailures == 2)

        var queued = M(state: .queued)
        #expect(try queued.handle(.conditionsBlock(Self.expensive, waits: true), now: 0)
            == [.emitStateChanged(from: .queued, to: .waiting, reason: Self.expensive)])
        #expect(try queued.handle(.resume, now: 1).contains(.enqueue), "resume still queues it (the daemon gates it again)")
    }

    /// `waitsForConnectivity: false`: a queued task (or one waiting for the conditions) fails at once with the
    /// reason; a running transfer goes on. Suspended tasks, finished ones and those waiting for a retry time are
    /// not touched by either input.
    @Test func noWaitFailsQueuedTasksAndOthersAreLeftAlone() throws {
        var queued = M(state: .queued)
        let actions = try queued.handle(.conditionsBlock(Self.offlineError, waits: false), now: 0)
        #expect(queued.state == .failed && queued.error == Self.offlineError)
        #expect(!actions.contains(.stopTransfer) && actions.contains(.emitComplete(error: Self.offlineError)))
        var running = M(state: .running)
        #expect(try running.handle(.conditionsBlock(Self.offlineError, waits: false), now: 0) == [])
        var waiting = M(state: .queued)
        _ = try waiting.handle(.conditionsBlock(Self.offlineError, waits: true), now: 0)
        _ = try waiting.handle(.conditionsBlock(Self.offlineError, waits: false), now: 1)
        #expect(waiting.state == .failed)

        let retrying = M(state: .waiting, waitingReason: TaskError(code: TaskErrorCode.connectionLost, message: "x"), nextAttemptAt: 50)
        for state in [M(state: .suspended), M(state: .completed), M(state: .failed), retrying] {
            var m = state
            #expect(try m.handle(.conditionsBlock(Self.expensive, waits: true), now: 0) == [])
            #expect(try m.handle(.conditionsAllow, now: 0) == [])
            #expect(m == state)
        }
        #expect(!retrying.isWaitingForConditions)
    }
}
