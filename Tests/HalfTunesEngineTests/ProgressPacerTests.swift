// ProgressPacer: at most one report per interval, nothing lost at the end, restarts from a new total.
@testable import HalfTunesEngine
import NIOCore
import Testing

@Suite("Progress pacing")
struct ProgressPacerTests {
    @Test func reportsAtMostOncePerIntervalAndFlushesTheRest() {
        let start = NIODeadline.now()
        var pacer = ProgressPacer(interval: .milliseconds(250), total: 100)
        pacer.restart(at: 100)
        let t0 = pacer.lastReportAt
        #expect(pacer.add(10, now: t0 + .milliseconds(100)) == nil)
        #expect(pacer.add(20, now: t0 + .milliseconds(200)) == nil)
        #expect(pacer.isBehind)
        // The interval has passed: one report of everything since the last one.
        #expect(pacer.add(5, now: t0 + .milliseconds(250)) == .init(delta: 35, total: 135))
        #expect(!pacer.isBehind)
        #expect(pacer.add(1, now: t0 + .milliseconds(300)) == nil)
        // The end: whatever is left, once.
        #expect(pacer.flush(now: t0 + .milliseconds(310)) == .init(delta: 1, total: 136))
        #expect(pacer.flush(now: t0 + .milliseconds(320)) == nil)
        #expect(start <= t0)
    }

    @Test func aRestartCountsFromTheNewTotalWithNothingToReport() {
        var pacer = ProgressPacer(interval: .milliseconds(250))
        let t0 = pacer.lastReportAt
        #expect(pacer.add(500, now: t0 + .seconds(1)) == .init(delta: 500, total: 500))
        _ = pacer.add(7, now: t0 + .seconds(1))
        pacer.restart(at: 0)  // a body sent anew after a redirect, or a download restarted from zero
        #expect(!pacer.isBehind)
        #expect(pacer.flush(now: pacer.lastReportAt) == nil)
        #expect(pacer.add(3, now: pacer.lastReportAt + .seconds(1)) == .init(delta: 3, total: 3))
    }

    /// Whatever the arrival pattern, the deltas reported add up to the total once flushed, and no two
    /// reports come closer than the interval (the final flush aside).
    @Test func deltasAddUpAndReportsAreSpaced() {
        var seed: UInt64 = 0x5EED
        func next(_ bound: UInt64) -> UInt64 {
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            return (seed >> 33) % bound
        }
        var pacer = ProgressPacer(interval: .milliseconds(250))
        var now = pacer.lastReportAt
        var reports: [(ProgressPacer.Report, NIODeadline)] = []
        var sum: Int64 = 0
        for _ in 0..<2_000 {
            now = now + .milliseconds(Int64(next(40)))
            let n = Int64(next(70_000))
            sum += n
            if let r = pacer.add(n, now: now) { reports.append((r, now)) }
        }
        if let r = pacer.flush(now: now) { reports.append((r, now)) }
        #expect(reports.map(\.0.delta).reduce(0, +) == sum)
        #expect(reports.last?.0.total == sum)
        for (a, b) in zip(reports.dropLast(), reports.dropLast().dropFirst()) {
            #expect(b.1 - a.1 >= .milliseconds(250))
        }
    }
}
