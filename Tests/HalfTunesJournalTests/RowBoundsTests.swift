import HalfTunesCore
import HalfTunesProtocol
import Testing
@testable import HalfTunesJournal

/// Numbers read from a row are put in range where they are decoded (a row edited by hand); those in range stay.
@Suite struct RowBoundsTests {
    @Test func aTaskRowsNumbersAreInRange() {
        var t = TaskRecord(id: 1, session: "s", url: "http://h/f", state: .queued, destination: "/d/f",
                           partialPath: "/d/.f", createdAt: .infinity, updatedAt: -.infinity)
        t.durableRanges = ByteRanges([0..<10, (Int64.max - 10)..<Int64.max])
        t.bytesExpected = Int64.max
        t.attempts = Int.max
        t.queueOrder = Int64.min
        t.nextAttemptAt = .nan
        t.maxConnections = 1 << 40
        t.bandwidthLimit = -5
        let b = t.bounded()
        #expect(b.durableRanges == ByteRanges([0..<10]))
        #expect(b.bytesExpected == HalfTunes.maxByteCount && b.attempts == Int(Int32.max))
        #expect(b.queueOrder == -(1 << 53) && b.nextAttemptAt == 0 && b.maxConnections == 16 && b.bandwidthLimit == 0)
        #expect(b.createdAt == RowBounds.times.upperBound && b.updatedAt == RowBounds.times.lowerBound)
        #expect(Timestamp.format(b.createdAt).hasPrefix("9999-12-31T23:59:59"))

        let fine = TaskRecord(id: 2, session: "s", url: "http://h/f", state: .queued, destination: "/d/f",
                              partialPath: "/d/.f", createdAt: 1_700_000_000.5, updatedAt: 1_700_000_001)
        #expect(fine.bounded() == fine)
    }

    @Test func aSessionsConfigurationAndLaunchAreInRange() {
        var config = SessionConfiguration(requestTimeout: 1e300, resourceTimeout: -1,
                                          retry: RetryPolicy(initialDelay: .infinity, jitter: 7),
                                          maxConcurrent: 0, maxConnectionsPerTask: 1_000_000, finishedTaskRetention: .nan)
        config.headers = [:]
        let s = SessionRecord(identifier: "1/s", uid: 1, configuration: config, state: .active, createdAt: 1e300,
                              ackedThrough: -3, launch: SessionLaunchRecord(lastLaunchAt: .infinity, failures: Int.max))
        let b = s.bounded()
        #expect(b.configuration.requestTimeout == 86_400 && b.configuration.resourceTimeout == 0.001)
        #expect(b.configuration.retry?.initialDelay == Seconds.longest && b.configuration.retry?.jitter == 1)
        #expect(b.configuration.maxConcurrent == 1 && b.configuration.maxConnectionsPerTask == 16)
        #expect(b.configuration.finishedTaskRetention == 0 && b.ackedThrough == 0)
        #expect(b.launch?.failures == Int(Int32.max) && b.launch?.lastLaunchAt == RowBounds.times.upperBound)
    }

    @Test func timesAndDelaysNeverTrap() {
        #expect(Timestamp.format(.infinity) == "9999-12-31T23:59:59.999Z")
        #expect(Timestamp.format(-.infinity) == "0001-01-01T00:00:00.000Z")
        #expect(Timestamp.format(.nan) == "1970-01-01T00:00:00.000Z")
        #expect(Seconds.nanoseconds(.infinity) == Int64(Seconds.longest * 1e9))
        #expect(Seconds.nanoseconds(-1) == 0 && Seconds.nanoseconds(.nan) == 0 && Seconds.nanoseconds(1.5) == 1_500_000_000)
    }
}
