// daemon.setLimits calls that resume out of order: memory ends with what the journal ends with.
import HalfTunesProtocol
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
