// A token bucket for bandwidth limits, as a pure value type with the clock passed in.

/// Meters bytes against a rate. Each `reserve` takes its bytes at once, going into debt when the bucket is
/// empty, and returns the byte's *position* in the bucket's stream; the caller waits until `delay(until:)`
/// says that position is paid for. Positions stay valid when the rate changes: the debt is then paid back at
/// the new rate, so a changed limit applies to bytes already reserved.
///
/// Smooth by construction: an idle bucket fills up to `capacity` only (1/8 s of the rate, at least one
/// 16 KiB read and at most 1 MiB), so a resumed or long idle transfer never bursts far above the limit.
public struct TokenBucket: Sendable, Equatable {
    /// Bytes per second; 0 means unlimited.
    public private(set) var rate: Int64
    /// Most bytes that may pass at once after idling.
    public private(set) var capacity: Double
    /// Cumulative bytes reserved so far.
    private var reserved: Double = 0
    /// Cumulative bytes paid for so far (may run ahead of `reserved` by at most `capacity`).
    private var paid: Double
    private var lastUpdate: Double

    public static let minimumCapacity = 16.0 * 1024
    public static let maximumCapacity = 1024.0 * 1024

    public init(rate: Int64, now: Double) {
        self.rate = max(0, rate)
        self.capacity = Self.capacity(for: self.rate)
        self.paid = capacity
        self.lastUpdate = now
    }

    public var isUnlimited: Bool { rate == 0 }

    /// Bytes that may pass now without waiting (negative: the debt).
    public mutating func available(now: Double) -> Double {
        refill(now: now)
        return paid - reserved
    }

    /// Changes the rate. Bytes already reserved are paid for at the new rate from now on; the tokens on
    /// hand are capped to the new capacity.
    public mutating func setRate(_ newRate: Int64, now: Double) {
        refill(now: now)
        rate = max(0, newRate)
        capacity = Self.capacity(for: rate)
        if rate == 0 {
            paid = reserved + capacity
        } else {
            paid = min(paid, reserved + capacity)
        }
    }

    /// Takes `bytes` from the bucket; returns the position to wait for with `delay(until:now:)`.
    public mutating func reserve(_ bytes: Int, now: Double) -> Double {
        refill(now: now)
        reserved += Double(max(0, bytes))
        if rate == 0 { paid = max(paid, reserved) }
        return reserved
    }

    /// Seconds until the bytes up to `position` are paid for (0 when they may pass now).
    public mutating func delay(until position: Double, now: Double) -> Double {
        refill(now: now)
        guard rate > 0, position > paid else { return 0 }
        return (position - paid) / Double(rate)
    }

    private mutating func refill(now: Double) {
        let elapsed = max(0, now - lastUpdate)
        lastUpdate = max(lastUpdate, now)
        if rate == 0 {
            paid = max(paid, reserved)
            return
        }
        paid = min(paid + elapsed * Double(rate), reserved + capacity)
    }

    static func capacity(for rate: Int64) -> Double {
        guard rate > 0 else { return minimumCapacity }
        return min(max(Double(rate) / 8, minimumCapacity), maximumCapacity)
    }
}
