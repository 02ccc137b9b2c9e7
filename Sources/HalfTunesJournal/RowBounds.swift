// Numbers read from journal rows, brought into the ranges the daemon computes with.
import HalfTunesCore
import HalfTunesProtocol

/// A journal row holds what the daemon wrote, unless someone edited the file: every number read from a row is
/// put in its documented range here, where it is decoded, so no later sum, count or timer traps on it (a
/// timestamp past 2^63 ns, a queue place at `Int64.max`, a length near 2^63). Nothing in range changes.
enum RowBounds {
    /// Seconds since 1970 the daemon writes: years 0001–9999.
    static let times: ClosedRange<Double> = -62_135_596_800...253_402_300_799
    /// Queue places: far from either end of `Int64`, so the next one below the first or after the last is always
    /// there.
    static let queueOrders: ClosedRange<Int64> = -(1 << 53)...(1 << 53)
    /// Attempts, failures and other counts.
    static let counts: ClosedRange<Int> = 0...Int(Int32.max)

    static func time(_ t: Double) -> Double { t.isNaN ? 0 : min(max(t, times.lowerBound), times.upperBound) }
    static func time(_ t: Double?) -> Double? { t.map(time) }
    static func bytes(_ n: Int64?) -> Int64? { n.map { min(max($0, 0), HalfTunes.maxByteCount) } }
    static func count(_ n: Int) -> Int { min(max(n, counts.lowerBound), counts.upperBound) }
}

extension TaskRecord {
    /// The row with every number in range (`RowBounds`).
    func bounded() -> TaskRecord {
        var r = self
        if durableRanges.upperBound > HalfTunes.maxByteCount {
            r.durableRanges = durableRanges.clipped(to: HalfTunes.maxByteCount)
        }
        r.bytesExpected = RowBounds.bytes(bytesExpected)
        r.attempts = RowBounds.count(attempts)
        r.queueOrder = min(max(queueOrder, RowBounds.queueOrders.lowerBound), RowBounds.queueOrders.upperBound)
        r.createdAt = RowBounds.time(createdAt)
        r.updatedAt = RowBounds.time(updatedAt)
        r.nextAttemptAt = RowBounds.time(nextAttemptAt)
        r.resourceDeadline = RowBounds.time(resourceDeadline)
        r.earliestBeginDate = RowBounds.time(earliestBeginDate)
        r.bandwidthLimit = RowBounds.bytes(bandwidthLimit)
        r.maxResponseBytes = RowBounds.bytes(maxResponseBytes)
        r.maxConnections = maxConnections.map {
            min(max($0, SessionConfiguration.maxConnectionsRange.lowerBound), SessionConfiguration.maxConnectionsRange.upperBound)
        }
        return r
    }
}

extension SessionRecord {
    /// The session with its numbers in range, its configuration's included (a stored configuration was checked
    /// when it was opened, so only an edited row changes here).
    func bounded() -> SessionRecord {
        var r = self
        r.createdAt = RowBounds.time(createdAt)
        r.configuration = configuration.bounded()
        r.ackedThrough = max(0, ackedThrough)
        if var launch {
            launch.lastLaunchAt = RowBounds.time(launch.lastLaunchAt)
            launch.nextAttemptAt = RowBounds.time(launch.nextAttemptAt)
            launch.failures = RowBounds.count(launch.failures)
            r.launch = launch
        }
        return r
    }
}

extension ResumeTokenRecord {
    func bounded() -> ResumeTokenRecord {
        var r = self
        if ranges.upperBound > HalfTunes.maxByteCount { r.ranges = ranges.clipped(to: HalfTunes.maxByteCount) }
        r.bytesExpected = RowBounds.bytes(bytesExpected)
        r.createdAt = RowBounds.time(createdAt)
        return r
    }
}

extension SessionConfiguration {
    func bounded() -> SessionConfiguration {
        var c = self
        func clamp(_ v: Double?, _ range: ClosedRange<Double>) -> Double? {
            v.map { $0.isNaN ? range.lowerBound : min(max($0, range.lowerBound), range.upperBound) }
        }
        c.requestTimeout = clamp(requestTimeout, 0.001...86_400)
        c.resourceTimeout = clamp(resourceTimeout, 0.001...(365 * 86_400))
        c.finishedTaskRetention = clamp(finishedTaskRetention, 0...SessionConfiguration.maxFinishedTaskRetention)
        c.maxConcurrent = maxConcurrent.map { min(max($0, 1), 1000) }
        let connections = SessionConfiguration.maxConnectionsRange
        c.maxConnectionsPerTask = maxConnectionsPerTask.map { min(max($0, connections.lowerBound), connections.upperBound) }
        if var retry {
            retry.initialDelay = clamp(retry.initialDelay, 0...Seconds.longest)
            retry.maxDelay = clamp(retry.maxDelay, 0...Seconds.longest)
            retry.maxRetryAfter = clamp(retry.maxRetryAfter, 0...Seconds.longest)
            retry.jitter = clamp(retry.jitter, 0...1)
            retry.maxAttempts = retry.maxAttempts.map { RowBounds.count($0) }
            c.retry = retry
        }
        return c
    }
}
