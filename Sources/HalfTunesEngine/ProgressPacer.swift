// At most one progress report per interval, nothing left unreported at the end (pure: the clock is an input).
import NIOCore
import HalfTunesProtocol

/// Paces progress reports: at most one per interval, plus a final one for bytes left unreported. Times are
/// seconds on any monotonic clock (`NIODeadline.seconds`), given with every call.
struct ProgressPacer: Sendable, Equatable {
    struct Report: Sendable, Equatable {
        var delta: Int64
        var total: Int64
    }

    /// Seconds between two reports.
    let interval: Double
    private(set) var total: Int64
    private(set) var reported: Int64
    private(set) var lastReportAt: Double

    init(interval: Double, total: Int64 = 0, now: Double) {
        self.interval = interval
        self.total = total
        self.reported = total
        self.lastReportAt = now
    }

    init(interval: TimeAmount, total: Int64 = 0, now: Double) {
        self.init(interval: interval.seconds, total: total, now: now)
    }

    /// Bytes are left unreported.
    var isBehind: Bool { total != reported }

    /// When the next report may come.
    var nextReportAt: Double { lastReportAt + interval }

    /// Starts counting again from `total` (a new response, or a body sent anew), with nothing to report.
    mutating func restart(at total: Int64, now: Double) {
        self.total = total
        reported = total
        lastReportAt = now
    }

    /// Counts `bytes`; a report when the interval has passed since the last one.
    mutating func add(_ bytes: Int64, now: Double) -> Report? {
        total += bytes
        return now - lastReportAt >= interval ? flush(now: now) : nil
    }

    /// A report of whatever is unreported (nil when nothing is).
    mutating func flush(now: Double) -> Report? {
        guard total != reported else { return nil }
        let report = Report(delta: total - reported, total: total)
        reported = total
        lastReportAt = now
        return report
    }
}

extension NIODeadline {
    /// Seconds on the monotonic clock, as the pure machines take times.
    var seconds: Double { Double(uptimeNanoseconds) / 1e9 }

    /// The deadline `seconds` on the monotonic clock name (0 and earlier: the clock's start).
    init(seconds: Double) {
        self = .uptimeNanoseconds(UInt64(Seconds.nanoseconds(seconds)))
    }
}

extension TimeAmount {
    var seconds: Double { Double(nanoseconds) / 1e9 }
}
