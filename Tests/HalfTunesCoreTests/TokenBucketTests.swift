import HalfTunesCore
import Testing

@Suite("Token bucket")
struct TokenBucketTests {
    let KiB = 1024.0
    let MiB = 1024.0 * 1024

    /// A consumer that reserves 64 KiB chunks and waits each chunk's delay moves at the rate.
    @Test func steadyConsumerMovesAtTheRate() {
        let rate: Int64 = 2 << 20
        var bucket = TokenBucket(rate: rate, now: 0)
        var now = 0.0
        var bytes = 0.0
        while now < 10 {
            let position = bucket.reserve(65536, now: now)
            now += bucket.delay(until: position, now: now)
            bytes += 65536
        }
        let expected = Double(rate) * 10
        #expect(bytes >= expected * 0.99 && bytes <= expected + bucket.capacity + 65536)
    }

    /// After a long idle time only `capacity` bytes pass at once; the rest waits for the rate.
    @Test func noBurstAfterIdling() {
        var bucket = TokenBucket(rate: 1 << 20, now: 0)
        #expect(bucket.capacity <= MiB / 8 + 1)
        var last = 0.0
        for _ in 0..<160 { last = bucket.reserve(65536, now: 1000) } // 10 MiB at once after 1000 s idle
        let delay = bucket.delay(until: last, now: 1000)
        #expect(abs(delay - (10 * MiB - bucket.capacity) / MiB) < 0.001)
        #expect(bucket.available(now: 1000) < 0)
    }

    /// A fresh bucket (a resumed transfer) starts with at most its small capacity.
    @Test func freshBucketHoldsOnlyItsCapacity() {
        var bucket = TokenBucket(rate: 8 << 20, now: 5)
        #expect(bucket.available(now: 5) == bucket.capacity)
        #expect(bucket.capacity == MiB) // 1/8 s of 8 MiB/s
        let p = bucket.reserve(2 << 20, now: 5)
        #expect(abs(bucket.delay(until: p, now: 5) - 1.0 / 8) < 1e-9)
        var slow = TokenBucket(rate: 1024, now: 0)
        #expect(slow.capacity == TokenBucket.minimumCapacity)
        #expect(slow.available(now: 1e6) == TokenBucket.minimumCapacity)
    }

    /// Bytes already reserved are paid back at the new rate from the moment it changes.
    @Test func rateChangeAppliesToReservedBytes() {
        var bucket = TokenBucket(rate: 64 << 10, now: 0)
        let position = bucket.reserve(1 << 20, now: 0)
        let before = bucket.delay(until: position, now: 0)
        #expect(before > 14 && before < 16)
        bucket.setRate(1 << 20, now: 1)
        let after = bucket.delay(until: position, now: 1)
        #expect(after > 0.8 && after < 1)
        bucket.setRate(0, now: 1.5)
        #expect(bucket.isUnlimited)
        #expect(bucket.delay(until: position, now: 1.5) == 0)
        #expect(bucket.delay(until: bucket.reserve(100 << 20, now: 1.5), now: 1.5) == 0)
        // Limited again: no credit from the unlimited time beyond the capacity.
        bucket.setRate(1 << 20, now: 2)
        let p2 = bucket.reserve(1 << 20, now: 100)
        #expect(abs(bucket.delay(until: p2, now: 100) - (MiB - bucket.capacity) / MiB) < 1e-9)
    }

    @Test func aClockGoingBackwardsGivesNoTokens() {
        var bucket = TokenBucket(rate: 1 << 20, now: 10)
        let p = bucket.reserve(1 << 20, now: 10)
        let d = bucket.delay(until: p, now: 10)
        #expect(bucket.delay(until: p, now: 5) == d)
    }
}
