/// Aggregate transfer rate over a sliding window, fed with byte deltas.
struct ThroughputMeter {
    private var samples: [(time: Double, bytes: Int64)] = []
    let window: Double

    init(window: Double = 3) { self.window = window }

    mutating func add(_ bytes: Int64, at time: Double) {
        samples.append((time, bytes))
        trim(now: time)
    }

    mutating func rate(now: Double) -> Double {
        trim(now: now)
        let total = samples.reduce(Int64(0)) { $0 + $1.bytes }
        return Double(total) / window
    }

    private mutating func trim(now: Double) {
        let cutoff = now - window
        if let first = samples.firstIndex(where: { $0.time >= cutoff }) {
            if first > 0 { samples.removeFirst(first) }
        } else {
            samples.removeAll(keepingCapacity: true)
        }
    }
}
