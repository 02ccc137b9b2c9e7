import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// Each host's allowance of extra connections (split downloads) is the state's: after an input that changed the
/// host's running or queued tasks, or the per-host limit, the host whose allowance is now another than the one it
/// was last given gets it as an action (`hostAllowance`), which the runner hands to `HostConnections`. So it is in
/// the replay like every other side effect, and an input that changes nothing of it says nothing.
@Suite("DaemonState: host allowances")
struct DaemonStateHostAllowanceTests {
    typealias T = DaemonStateTests
    static let a = "http://a.test:80"
    static let b = "http://b.test:80"

    static func allowances(_ actions: [DaemonState.Action]) -> [DaemonState.Action] {
        actions.filter { if case .hostAllowance = $0 { true } else { false } }
    }

    static func state() -> DaemonState {
        var state = T.state(limits: DaemonState.SlotLimits(maxConcurrent: 2, maxConnectionsPerHost: 4))
        _ = state.join([T.task(1, session: "a", owner: 1, host: "a.test:80"),
                                   T.task(2, session: "a", owner: 1, host: "a.test:80"),
                                   T.task(3, session: "b", owner: 2, host: "b.test:80")], now: 0)
        return state
    }

    @Test func whatThePerHostLimitLeavesAfterOnePerRunningTaskGivenOnlyWhenItChanges() {
        var state = Self.state()
        let first = state.handle(.task(1, .resume), now: 1)
        #expect(T.started(first) == [1])
        #expect(Self.allowances(first) == [.hostAllowance(Self.a, extras: 3)])
        #expect(first.last == .hostAllowance(Self.a, extras: 3), "after the input's other actions")
        #expect(Self.allowances(state.handle(.task(2, .resume), now: 2)) == [.hostAllowance(Self.a, extras: 2)])
        // Progress changes no host's tasks: nothing to give.
        #expect(Self.allowances(state.handle(.attemptProgress(1, .received(delta: 10, total: 10, expected: 100)), now: 3)).isEmpty)
        // A third task for the host is queued (two slots): no extras for the host while it waits.
        _ = state.join([T.task(4, session: "a", owner: 1, host: "a.test:80")], now: 4)
        #expect(Self.allowances(state.handle(.task(4, .resume), now: 4)) == [.hostAllowance(Self.a, extras: 0)])
        #expect(state.tasks[4]?.machine.state == .queued)
        // Task 2 suspended: task 4 takes its slot, two running again, none queued.
        let suspended = state.handle(.task(2, .suspend), now: 5)
        #expect(T.started(suspended) == [4])
        #expect(Self.allowances(suspended) == [.hostAllowance(Self.a, extras: 2)])
        // The running ones suspended: nothing left to the host, said once.
        #expect(Self.allowances(state.handle(.task(1, .suspend), now: 6)) == [.hostAllowance(Self.a, extras: 3)])
        #expect(Self.allowances(state.handle(.task(4, .suspend), now: 7)) == [.hostAllowance(Self.a, extras: 0)])
        #expect(Self.allowances(state.handle(.task(1, .cancel(keepPartial: false)), now: 8)).isEmpty, "0 already")
        #expect(state.hostAllowances.isEmpty, "a host with no allowance is not kept")
    }

    @Test func aNewPerHostLimitGivesEveryRunningHostItsNewAllowanceInHostOrder() {
        var state = Self.state()
        _ = state.handle(.task(3, .resume), now: 1)
        _ = state.handle(.task(1, .resume), now: 1)
        #expect(state.hostAllowances == [Self.a: 3, Self.b: 3])
        let raised = state.handle(.limitsConfigured(DaemonLimits(maxConcurrent: 2, maxConnectionsPerHost: 6, bandwidthLimit: 0)), now: 2)
        #expect(Self.allowances(raised) == [.hostAllowance(Self.a, extras: 5), .hostAllowance(Self.b, extras: 5)])
        // The same limit again (only the daemon-wide one changes): no host's allowance changes.
        let same = state.handle(.limitsConfigured(DaemonLimits(maxConcurrent: 3, maxConnectionsPerHost: 6, bandwidthLimit: 0)), now: 3)
        #expect(Self.allowances(same).isEmpty)
    }
}
