// ProgressPacer: at most one report per interval, nothing lost at the end, restarts from a new total (virtual time).
@testable import HalfTunesEngine
import NIOCore
import Testing

@Suite("Progress pacing")
struct ProgressPacerTests {
    @Test func reportsAtMostOncePerIntervalAndFlushesTheRest() {
        var pacer = ProgressPacer(interval: 0.25, total: 100, now: 50)
        pacer.restart(at: 100, now: 60)
        #expect(pacer.add(10, now: 60.1) == nil)
        #expect(pacer.add(20, now: 60.2) == nil)
        #expect(pacer.isBehind && pacer.nextReportAt == 60.25)
        // The interval has passed: one report of everything since the last one.
        #expect(pacer.add(5, now: 60.25) == .init(delta: 35, total: 135))
        #expect(!pacer.isBehind)
        #expect(pacer.add(1, now: 60.3) == nil)
        // The end: whatever is left, once.
        #expect(pacer.flush(now: 60.31) == .init(delta: 1, total: 136))
        #expect(pacer.flush(now: 60.32) == nil)
    }

    @Test func aRestartCountsFromTheNewTotalWithNothingToReport() {
        var pacer = ProgressPacer(interval: .milliseconds(250), now: 0)
        #expect(pacer.interval == 0.25)
        #expect(pacer.add(500, now: 1) == .init(delta: 500, total: 500))
        _ = pacer.add(7, now: 1)
        pacer.restart(at: 0, now: 1)  // a body sent anew after a redirect, or a download restarted from zero
        #expect(!pacer.isBehind)
        #expect(pacer.flush(now: 1) == nil)
        #expect(pacer.add(3, now: 2) == .init(delta: 3, total: 3))
    }

    /// Whatever the arrival pattern, the deltas reported add up to the total once flushed, and no two
    /// reports come closer than the interval (the final flush aside).
    @Test func deltasAddUpAndReportsAreSpaced() {
        var seed: UInt64 = 0x5EED
        func next(_ bound: UInt64) -> UInt64 {
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            return (seed >> 33) % bound
        }
        var pacer = ProgressPacer(interval: 0.25, now: 0)
        var now = 0.0
        var reports: [(ProgressPacer.Report, Double)] = []
        var sum: Int64 = 0
        for _ in 0..<2_000 {
            now += Double(next(40)) / 1000
            let n = Int64(next(70_000))
            sum += n
            if let r = pacer.add(n, now: now) { reports.append((r, now)) }
        }
        if let r = pacer.flush(now: now) { reports.append((r, now)) }
        #expect(reports.map(\.0.delta).reduce(0, +) == sum)
        #expect(reports.last?.0.total == sum)
        for (a, b) in zip(reports.dropLast(), reports.dropLast().dropFirst()) {
            #expect(b.1 - a.1 >= 0.25 - 1e-9)
        }
    }

    @Test func deadlinesAndSecondsRoundTrip() {
        let deadline = NIODeadline.uptimeNanoseconds(12_345_000_000)
        #expect(deadline.seconds == 12.345)
        #expect(NIODeadline(seconds: 12.345).uptimeNanoseconds / 1_000 == 12_345_000)
        #expect(NIODeadline(seconds: -1) == .uptimeNanoseconds(0))
    }
}
