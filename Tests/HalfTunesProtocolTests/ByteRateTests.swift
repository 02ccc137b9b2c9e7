import HalfTunesProtocol
import Testing

@Suite("Byte rates")
struct ByteRateTests {
    @Test func parsesBinarySuffixes() {
        #expect(ByteRate.parse("1024") == 1024)
        #expect(ByteRate.parse("512k") == Int64(512 * 1024))
        #expect(ByteRate.parse("512K") == Int64(512 * 1024))
        #expect(ByteRate.parse("2M") == Int64(2 * 1024 * 1024))
        #expect(ByteRate.parse("1.5G") == Int64(1536 * 1024 * 1024))
        #expect(ByteRate.parse("2MB/s") == Int64(2 * 1024 * 1024))
        #expect(ByteRate.parse(" 100k/s ") == Int64(100 * 1024))
        #expect(ByteRate.parse("0") == 0)
        #expect(ByteRate.parse("none") == 0)
    }

    @Test func refusesWhatIsNotARate() {
        for bad in ["", "k", "-1", "2X", "1e6", "2 M", "fast", "1T", "99999999G"] {
            #expect(ByteRate.parse(bad) == nil, "\(bad)")
        }
        #expect(ByteRate.problem(with: 100) != nil)
        #expect(ByteRate.problem(with: 0) == nil && ByteRate.problem(with: 1024) == nil)
    }

    @Test func formatsInPowersOf1024() {
        #expect(ByteRate.format(0) == "unlimited")
        #expect(ByteRate.format(1000) == "1000 B/s")
        #expect(ByteRate.format(2 << 20) == "2 MiB/s")
        #expect(ByteRate.format(1536 << 10) == "1.5 MiB/s")
        #expect(ByteRate.format(1 << 30 + 1 << 20) == "1 GiB/s")
    }
}
