// Bandwidth limiting shared by transfers: thread-safe buckets and the limiter a transfer waits on.
import HalfTunesCore
import NIOConcurrencyHelpers
import NIOCore
import HalfTunesProtocol

/// A `TokenBucket` shared between threads (the daemon-wide bucket, or one task's own bucket). Its rate can
/// be changed at any time; transfers waiting on it see the change within `RateLimiter.maximumWaitSlice`.
public final class BandwidthBucket: Sendable {
    private let bucket: NIOLockedValueBox<TokenBucket>
    private let clock: @Sendable () -> Double

    /// - Parameters:
    ///   - rate: bytes per second, 0 = unlimited.
    ///   - clock: monotonic seconds.
    public init(rate: Int64, clock: @escaping @Sendable () -> Double = RateLimiter.monotonicSeconds) {
        self.clock = clock
        self.bucket = NIOLockedValueBox(TokenBucket(rate: rate, now: clock()))
    }

    public var rate: Int64 { bucket.withLockedValue { $0.rate } }

    public func setRate(_ rate: Int64) {
        let now = clock()
        bucket.withLockedValue { $0.setRate(rate, now: now) }
    }

    func reserve(_ bytes: Int) -> Double {
        let now = clock()
        return bucket.withLockedValue { $0.reserve(bytes, now: now) }
    }

    func delay(until position: Double) -> Double {
        let now = clock()
        return bucket.withLockedValue { $0.delay(until: position, now: now) }
    }
}

/// What a transfer (download or upload) meters its bytes against: every bucket it is subject to (the
/// daemon-wide one and the task's own). Usage, for any byte stream:
///
///     let reservation = limiter.reserve(chunk.count)   // after receiving, or before sending, a chunk
///     await limiter.wait(for: reservation)             // or poll `delay(for:)` from an event loop
///
/// The delay is the longest of the buckets'. Waiting in slices of at most `maximumWaitSlice` and asking
/// again makes a changed limit apply to a running transfer within that slice.
public final class RateLimiter: Sendable {
    public struct Reservation: Sendable {
        fileprivate var positions: [Double]
    }

    /// Longest single sleep before the delay is asked for again.
    public static let maximumWaitSlice = 0.25

    private let buckets: [BandwidthBucket]

    public init(buckets: [BandwidthBucket]) {
        self.buckets = buckets
    }

    /// The lowest limit in effect now, in bytes per second (nil: none): more connections cannot go faster.
    public var ceiling: Double? {
        buckets.map(\.rate).filter { $0 > 0 }.min().map(Double.init)
    }

    /// Counts `bytes` against every bucket.
    public func reserve(_ bytes: Int) -> Reservation {
        Reservation(positions: buckets.map { $0.reserve(bytes) })
    }

    /// Seconds until the reserved bytes may pass, under the rates in effect now (0: go on).
    public func delay(for reservation: Reservation) -> Double {
        var longest = 0.0
        for (bucket, position) in zip(buckets, reservation.positions) {
            longest = max(longest, bucket.delay(until: position))
        }
        return longest
    }

    /// Sleeps until the reserved bytes may pass (returns early when the task is cancelled).
    public func wait(for reservation: Reservation) async {
        while !Task.isCancelled {
            let delay = delay(for: reservation)
            guard delay > 0.0005 else { return }
            let slice = min(delay, Self.maximumWaitSlice)
            try? await Task.sleep(nanoseconds: UInt64(Seconds.nanoseconds(slice)))
        }
    }

    /// Monotonic seconds (CLOCK_MONOTONIC): unaffected by wall-clock changes.
    @Sendable public static func monotonicSeconds() -> Double {
        NIODeadline.now().seconds
    }
}
