// Aggregate transfer rate over a sliding window, fed with byte deltas, in constant time per sample.
import DequeModule

/// Aggregate transfer rate over a sliding window, fed with byte deltas. Samples within one `resolution` of the
/// last are added to it, and a running total is kept, so a report and a rate cost O(1) however many transfers
/// report (the window holds at most `window / resolution` + 1 samples).
struct ThroughputMeter {
    private var samples: Deque<(time: Double, bytes: Int64)> = []
    private var total: Int64 = 0
    let window: Double
    /// Samples closer than this to the last one join it (their bytes count from its time).
    let resolution: Double

    init(window: Double = 3, resolution: Double = 0.1) {
        self.window = window
        self.resolution = resolution
    }

    mutating func add(_ bytes: Int64, at time: Double) {
        total += bytes
        if let last = samples.last, time - last.time < resolution, time >= last.time {
            samples[samples.count - 1].bytes += bytes
        } else {
            samples.append((time, bytes))
        }
        trim(now: time)
    }

    /// How many samples the window holds (tests).
    var sampleCount: Int { samples.count }

    mutating func rate(now: Double) -> Double {
        trim(now: now)
        return Double(total) / window
    }

    private mutating func trim(now: Double) {
        let cutoff = now - window
        while let first = samples.first, first.time < cutoff {
            total -= first.bytes
            samples.removeFirst()
        }
    }
}
