// Split downloads' extra connections: the budget per host, and the state's per-host limit counting them.
import HalfTunesProtocol
import NIOConcurrencyHelpers
import Testing
@testable import HalfTunesDaemon

@Suite struct HostConnectionsTests {
    /// What a budget told: the hosts whose extras changed, and the sheds asked of each task.
    final class Log: Sendable {
        let changes = NIOLockedValueBox<[String]>([])
        let sheds = NIOLockedValueBox<[(task: Int64, count: Int)]>([])

        func budget() -> HostConnections {
            let budget = HostConnections()
            budget.onChange { host in self.changes.withLockedValue { $0.append(host) } }
            return budget
        }

        func shed(_ task: Int64) -> HostConnections.Shed {
            { n in self.sheds.withLockedValue { $0.append((task, n)) } }
        }
    }

    @Test func grantsStayWithinTheAllowanceAndExcessIsShedNewestFirst() {
        let log = Log()
        let budget = log.budget()
        #expect(!budget.tryAcquire("h", task: 1, shed: log.shed(1)), "no allowance: no extra connection")
        budget.setAllowance(3, host: "h")
        #expect(budget.tryAcquire("h", task: 1, shed: log.shed(1)))
        #expect(budget.tryAcquire("h", task: 2, shed: log.shed(2)))
        #expect(budget.tryAcquire("h", task: 2, shed: log.shed(2)))
        #expect(!budget.tryAcquire("h", task: 1, shed: log.shed(1)), "the allowance is used up")
        #expect(!budget.tryAcquire("other", task: 3, shed: log.shed(3)), "another host has its own")
        #expect(budget.extras("h") == 3 && budget.extras("h", task: 2) == 2 && budget.totalExtras == 3)
        #expect(log.changes.withLockedValue { $0 } == ["h", "h", "h"])

        // A task is queued for the host: every extra is asked back, the newest grant's holder first.
        budget.setAllowance(0, host: "h")
        #expect(log.sheds.withLockedValue { $0.map(\.task) } == [2, 1])
        #expect(log.sheds.withLockedValue { $0.map(\.count) } == [2, 1])
        // Asked once: setting the same allowance again asks nothing more while the sheds are under way.
        budget.setAllowance(0, host: "h")
        #expect(log.sheds.withLockedValue { $0.count } == 2)
        budget.release("h", task: 2, count: 1)
        budget.release("h", task: 2, count: 1)
        budget.release("h", task: 1)
        #expect(budget.extras("h") == 0 && budget.totalExtras == 0)
        #expect(log.changes.withLockedValue { $0.count } == 6)
        budget.release("h", task: 1) // nothing held: nothing happens
        #expect(log.changes.withLockedValue { $0.count } == 6)
    }

    /// A server that refused a further connection (429, 503): the host gets no more extras than it had without
    /// that one until its Retry-After (or a minute) has passed, for every task; other hosts are not affected.
    @Test func aRefusalCapsTheHostUntilItsRetryAfterPasses() {
        let now = NIOLockedValueBox(100.0)
        let budget = HostConnections(clock: { now.withLockedValue { $0 } })
        let shed: HostConnections.Shed = { _ in }
        budget.setAllowance(5, host: "h")
        budget.setAllowance(5, host: "other")
        #expect(budget.tryAcquire("h", task: 1, shed: shed) && budget.tryAcquire("h", task: 1, shed: shed))
        budget.refused("h", retryAfter: 30) // the request of task 1's second extra was refused
        budget.release("h", task: 1, count: 1)
        #expect(!budget.tryAcquire("h", task: 2, shed: shed), "1 extra left, capped at 1")
        #expect(budget.tryAcquire("other", task: 3, shed: shed))
        now.withLockedValue { $0 += 29 }
        #expect(!budget.tryAcquire("h", task: 1, shed: shed))
        now.withLockedValue { $0 += 2 }
        #expect(budget.tryAcquire("h", task: 2, shed: shed), "Retry-After has passed")
        // Without Retry-After: a minute.
        budget.refused("h", retryAfter: nil)
        budget.release("h", task: 2, count: 1)
        now.withLockedValue { $0 += 59 }
        #expect(!budget.tryAcquire("h", task: 2, shed: shed))
        now.withLockedValue { $0 += 2 }
        #expect(budget.tryAcquire("h", task: 2, shed: shed))
    }

    static let limits = DaemonState.SlotLimits(maxConcurrent: 10, maxConnectionsPerHost: 4)

    /// The per-host limit counts extra connections: a task queued for a host whose connections are all in
    /// use waits, the host gets no allowance while it waits, and it starts once the extras are given back.
    @Test func extraConnectionsCountAgainstTheHostLimitAndAQueuedTaskGoesFirst() throws {
        var state = DaemonStateTests.state()
        let a = DaemonStateTests.task(1, session: "a", owner: 1, host: "h1")
        #expect(try DaemonStateTests.resumeAll(&state, [a], limits: Self.limits) == [1])
        let host = state.tasks[1]!.hostKey
        #expect(state.extraAllowance(host: host, limits: Self.limits) == 3, "4 per host, 1 running")

        // Task 1 splits over all four connections; task 2 for the same host is queued and held.
        _ = state.handle(.connectionsChanged(host: host, extras: 3), now: 1)
        #expect(state.connections(host: host) == 4)
        let b = DaemonStateTests.task(2, session: "a", owner: 1, host: "h1")
        #expect(try DaemonStateTests.resumeAll(&state, [b], limits: Self.limits, now: 2) == [])
        #expect(state.tasks[2]?.machine.state == .queued)
        #expect(state.tasks.changedHosts == [host], "the core gives the host its allowance again")
        #expect(state.extraAllowance(host: host, limits: Self.limits) == 0, "nothing extra while a task waits")

        // One extra given back: 1 + 2 = 3 of 4, so task 2 starts.
        var actions = state.handle(.connectionsChanged(host: host, extras: 2), now: 3)
        #expect(DaemonStateTests.started(actions) == [2])
        #expect(state.connections(host: host) == 4)
        #expect(state.extraAllowance(host: host, limits: Self.limits) == 2, "4 per host, 2 running")
        // A third task waits while the host is full, and starts when the extras are all given back.
        let c = DaemonStateTests.task(3, session: "a", owner: 1, host: "h1")
        #expect(try DaemonStateTests.resumeAll(&state, [c], limits: Self.limits, now: 4) == [])
        actions = state.handle(.connectionsChanged(host: host, extras: 0), now: 5)
        #expect(DaemonStateTests.started(actions) == [3])
        #expect(state.connections(host: host) == 3)
    }
}
