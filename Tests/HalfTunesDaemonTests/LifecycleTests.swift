// daemon.setLimits calls that resume out of order, and shutdown's grace period (DaemonCore+Lifecycle).
import HalfTunesProtocol
import NIOConcurrencyHelpers
import Testing
@testable import HalfTunesDaemon

@Suite("LimitSources")
struct LimitSourcesTests {
    @Test func theLaterCallWinsWhateverOrderTheCallsResumeIn() {
        var sources = LimitSources()
        let first = sources.ticket(), second = sources.ticket()
        // Written in ticket order; the second call's continuation runs first.
        sources.written(DaemonSetLimitsParams(maxConcurrent: 9, bandwidthLimit: 1000), ticket: second)
        sources.written(DaemonSetLimitsParams(maxConcurrent: 2, maxConnectionsPerHost: 3, bandwidthLimit: 5), ticket: first)
        #expect(sources.overrides.maxConcurrent == 9)
        #expect(sources.overrides.bandwidthLimit == 1000)
        #expect(sources.overrides.maxConnectionsPerHost == 3, "a limit only the first call set is the first call's")
        // In order, as usual: the later one wins too.
        let third = sources.ticket()
        sources.written(DaemonSetLimitsParams(maxConcurrent: 4), ticket: third)
        #expect(sources.overrides.maxConcurrent == 4)
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
