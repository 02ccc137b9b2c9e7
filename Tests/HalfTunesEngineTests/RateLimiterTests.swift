import HalfTunesCore
import HalfTunesEngine
import Testing

@Suite("Rate limiter")
struct RateLimiterTests {
    let MiB = 1024.0 * 1024

    /// The limiter waits for the slowest of its buckets; changing a bucket's rate applies at once.
    @Test func limiterUsesTheSlowestBucket() {
        let clock = ManualClock()
        let global = BandwidthBucket(rate: 4 << 20, clock: clock.now)
        let own = BandwidthBucket(rate: 1 << 20, clock: clock.now)
        let limiter = RateLimiter(buckets: [global, own])
        let r = limiter.reserve(2 << 20)
        let delay = limiter.delay(for: r)
        #expect(abs(delay - (2 * MiB - TokenBucket.minimumCapacity * 8) / MiB) < 0.01)
        own.setRate(0)
        let after = limiter.delay(for: r)
        #expect(after < 0.5 && after > 0.3) // the global 4 MiB/s bucket alone
        global.setRate(0)
        #expect(limiter.delay(for: r) == 0)
    }
}

/// A clock tests move by hand.
final class ManualClock: @unchecked Sendable {
    var time = 0.0
    var now: @Sendable () -> Double { { [self] in time } }
}
