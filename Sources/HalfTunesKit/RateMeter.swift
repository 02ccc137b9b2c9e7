/// Transfer rate over a sliding window of (time, total bytes) samples. A total that goes down (the
/// transfer restarted from zero) starts a new measurement.
public struct RateMeter: Sendable {
    public let window: Double
    private var samples: [(time: Double, bytes: Int64)] = []

    /// `window`: how many seconds of samples the rate is computed over.
    public init(window: Double = 5) { self.window = window }

    /// Records that `totalBytes` were transferred at `time` (seconds on any monotonic clock).
    public mutating func add(totalBytes: Int64, at time: Double) {
        if let last = samples.last, totalBytes < last.bytes || time < last.time { samples.removeAll() }
        samples.append((time, totalBytes))
        // Keep one sample at or before the window's start so the rate spans the whole window.
        while samples.count > 2, samples[1].time <= time - window { samples.removeFirst() }
    }

    /// Bytes per second over the window; nil until two samples at least 0.2 s apart are known.
    public var bytesPerSecond: Double? {
        guard let first = samples.first, let last = samples.last, last.time - first.time >= 0.2 else { return nil }
        return Double(last.bytes - first.bytes) / (last.time - first.time)
    }

    public mutating func reset() { samples.removeAll() }
}
