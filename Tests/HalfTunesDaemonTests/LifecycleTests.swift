// daemon.setLimits calls that resume out of order, and shutdown's grace period (DaemonCore+Lifecycle).
import HalfTunesProtocol
import NIOConcurrencyHelpers
import Testing
@testable import HalfTunesDaemon

@Suite("LimitSources")
struct LimitSourcesTests {
    /// `limitsSetting`'s answer: the call's place among the writes.
    static func ticket(_ state: inout DaemonState) -> UInt64? {
        guard case .limitsTicket(let ticket)? = state.handle(.limitsSetting, now: 0).first else { return nil }
        return ticket
    }

    @Test func theLaterCallWinsWhateverOrderTheCallsResumeIn() throws {
        var state = DaemonState()
        let first = try #require(Self.ticket(&state)), second = try #require(Self.ticket(&state))
        // Written in ticket order; the second call's continuation runs first.
        _ = state.handle(.limitsWritten(DaemonSetLimitsParams(maxConcurrent: 9, bandwidthLimit: 1000), ticket: second), now: 0)
        _ = state.handle(.limitsWritten(DaemonSetLimitsParams(maxConcurrent: 2, maxConnectionsPerHost: 3, bandwidthLimit: 5),
                                        ticket: first), now: 0)
        let sources = state.limitSources
        #expect(sources.overrides.maxConcurrent == 9)
        #expect(sources.overrides.bandwidthLimit == 1000)
        #expect(sources.overrides.maxConnectionsPerHost == 3, "a limit only the first call set is the first call's")
        // In order, as usual: the later one wins too.
        let third = try #require(Self.ticket(&state))
        _ = state.handle(.limitsWritten(DaemonSetLimitsParams(maxConcurrent: 4), ticket: third), now: 0)
        #expect(state.limitSources.overrides.maxConcurrent == 4)
    }

    /// The state decides which source wins and tells the runner only a new daemon-wide bandwidth.
    @Test func setLimitsWinOverTheConfigurationAndANewBandwidthIsAnAction() throws {
        var state = DaemonStateTests.state()
        let configured = DaemonLimits(maxConcurrent: 2, maxConnectionsPerHost: 8, bandwidthLimit: 4096)
        #expect(state.handle(.limitsConfigured(configured), now: 0) == [.setGlobalBandwidth(rate: 4096)])
        #expect(state.effectiveLimits == configured && state.limitSources.masked.isEmpty)
        _ = state.handle(.limitsRestored(stored: ["max-concurrent": "5"]), now: 0) // journaled at an earlier run
        #expect(state.effectiveLimits.maxConcurrent == 5 && state.limits.maxConcurrent == 5)
        // A reload: the bandwidth is the reload's (not overridden), the slots stay the daemon.setLimits value.
        let reload = DaemonLimits(maxConcurrent: 3, maxConnectionsPerHost: 8, bandwidthLimit: 4096)
        #expect(state.handle(.limitsConfigured(reload), now: 1).isEmpty, "nothing changed in effect")
        #expect(state.limitSources.masked == [.maxConcurrent] && state.effectiveLimits.maxConcurrent == 5)
        let ticket = try #require(Self.ticket(&state))
        #expect(state.handle(.limitsWritten(DaemonSetLimitsParams(bandwidthLimit: 0), ticket: ticket), now: 2)
                == [.setGlobalBandwidth(rate: 0)])
        #expect(state.effectiveLimits == DaemonLimits(maxConcurrent: 5, maxConnectionsPerHost: 8, bandwidthLimit: 0))
    }

    /// The journal's settings are judged by the state: a value that is not a number in its limit's range (another
    /// version's journal, a hand edit) is not used, and the configured one stays in effect.
    @Test func storedValuesOutsideTheirRangesAreNotUsed() {
        var state = DaemonStateTests.state()
        let configured = DaemonLimits(maxConcurrent: 2, maxConnectionsPerHost: 8, bandwidthLimit: 0)
        _ = state.handle(.limitsConfigured(configured), now: 0)
        for bad in [["max-concurrent": "0"], ["max-concurrent": "1001"], ["max-connections-per-host": "many"],
                    ["bandwidth-limit": "-5"], ["max-concurrent ": "4"], ["unknown": "3"]] {
            _ = state.handle(.limitsRestored(stored: bad), now: 0)
            #expect(state.limitSources.overrides == DaemonSetLimitsParams() && state.effectiveLimits == configured, "\(bad)")
        }
        let actions = state.handle(.limitsRestored(stored: ["max-concurrent": "1000", "max-connections-per-host": "1",
                                                           "bandwidth-limit": "65536"]), now: 1)
        #expect(state.effectiveLimits == DaemonLimits(maxConcurrent: 1000, maxConnectionsPerHost: 1, bandwidthLimit: 65536))
        #expect(actions == [.setGlobalBandwidth(rate: 65536)])
    }

    /// More slots in effect start queued tasks at once.
    @Test func moreSlotsStartQueuedTasks() throws {
        var state = DaemonStateTests.state()
        let ids = try DaemonStateTests.resumeAll(&state, (1...4).map { DaemonStateTests.task($0, session: "a", owner: 1) })
        #expect(ids == [1, 2])
        let ticket = try #require(Self.ticket(&state))
        let actions = state.handle(.limitsWritten(DaemonSetLimitsParams(maxConcurrent: 3), ticket: ticket), now: 1)
        #expect(DaemonStateTests.started(actions) == [3])
    }
}

/// Shutdown's grace period: an attempt that does not stop is not waited for.
@Suite("Waiting at most")
struct WaitAtMostTests {
    @Test func workThatGoesOnIsNotWaitedFor() async {
        let endless = Task { _ = try? await Task.sleep(nanoseconds: 3_600_000_000_000) }
        await DaemonCore.wait(atMost: 0.01, for: endless) // returns: the hour is not waited for
        #expect(!endless.isCancelled)
        endless.cancel()
    }

    @Test func workThatEndsIsWaitedForUntilItEnds() async {
        let ended = NIOLockedValueBox(false)
        let quick = Task { () -> Void in ended.withLockedValue { $0 = true } }
        await DaemonCore.wait(atMost: 3600, for: quick)
        #expect(ended.withLockedValue { $0 })
    }
}
