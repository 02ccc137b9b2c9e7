import Testing
import HalfTunesProtocol

struct FormattingTests {
    @Test func sizesUseDecimalSIUnitsWithOneDecimal() {
        #expect(Formatting.bytes(0) == "0 B")
        #expect(Formatting.bytes(999) == "999 B")
        #expect(Formatting.bytes(1000) == "1.0 kB")
        #expect(Formatting.bytes(12_400_000) == "12.4 MB")
        #expect(Formatting.bytes(12_449_999) == "12.4 MB")
        #expect(Formatting.bytes(999_949) == "999.9 kB")
        #expect(Formatting.bytes(999_950) == "1.0 MB")
        #expect(Formatting.bytes(3_200_000_000) == "3.2 GB")
        #expect(Formatting.bytes(Int64.max) == "9.2 EB")
    }

    @Test func percentagesRoundDownSoThatOnlyCompleteIsAHundred() {
        #expect(Formatting.percent(453, of: 1000) == "45.3%")
        #expect(Formatting.percent(9_999, of: 10_000) == "99.9%")
        #expect(Formatting.percent(10_000, of: 10_000) == "100.0%")
        #expect(Formatting.percent(0, of: 0) == "100.0%")
        #expect(Formatting.percent(5, of: nil) == nil)
        #expect(Formatting.progress(received: 5_617_200, expected: 12_400_000) == "45.3% of 12.4 MB")
        #expect(Formatting.progress(received: 3_100_000, expected: nil) == "3.1 MB of unknown size")
    }

    @Test func ratesDurationsAndETAs() {
        #expect(Formatting.rate(3_200_000) == "3.2 MB/s")
        #expect(Formatting.rate(512) == "512 B/s")
        #expect(Formatting.rate(0) == "0 B/s")
        #expect(Formatting.rate(.nan) == "0 B/s")
        #expect(Formatting.duration(0) == "0s")
        #expect(Formatting.duration(45) == "45s")
        #expect(Formatting.duration(185) == "3m 05s")
        #expect(Formatting.duration(7_380) == "2h 03m")
        #expect(Formatting.duration(273_600) == "3d 04h")
        #expect(Formatting.eta(received: 200, expected: 1_000, bytesPerSecond: 10) == "1m 20s")
        #expect(Formatting.eta(received: 200, expected: nil, bytesPerSecond: 10) == nil)
        #expect(Formatting.eta(received: 200, expected: 1_000, bytesPerSecond: 0) == nil)
        // A server's claimed 2^62 bytes over a trickle of 0.2 B/s (Int64(2.3e19) trapped in halftunesctl).
        #expect(Formatting.eta(received: 0, expected: 1 << 62, bytesPerSecond: 0.2) == "∞")
        #expect(Formatting.duration(1e300) == "∞" && Formatting.duration(-.infinity) == "∞")
        #expect(Formatting.duration(-5) == "0s")
    }

    @Test func progressBars() {
        #expect(Formatting.progressBar(fraction: 0.5, width: 10) == "[=====>    ]")
        #expect(Formatting.progressBar(fraction: 0, width: 4) == "[>   ]")
        #expect(Formatting.progressBar(fraction: 1, width: 4) == "[====]")
        #expect(Formatting.progressBar(fraction: nil, width: 3) == "[···]")
    }

    @Test func timestampsParseBackToTheirSeconds() throws {
        #expect(Formatting.parseTimestamp("1970-01-01T00:00:01.500Z") == 1.5)
        #expect(Formatting.parseTimestamp("1970-01-01T01:00:00+01:00") == 0)
        #expect(Formatting.parseTimestamp("2026-11-22 03:51:27Z") == 1_795_319_487)
        #expect(Formatting.parseTimestamp("yesterday") == nil)
        #expect(Formatting.parseTimestamp("2026-11-22T03:51:27.123") == nil)
        let seconds = 1_795_319_487.25
        let parsed = try #require(Formatting.parseTimestamp(Timestamp.format(seconds)))
        #expect(abs(parsed - seconds) < 0.001)
        #expect(Formatting.relative(112, now: 100) == "in 12s")
        #expect(Formatting.relative(100, now: 285) == "3m 05s ago")
    }
}
