import Testing
import HalfTunesKit

struct RateMeterTests {
    @Test func rateMeterMeasuresOverItsWindowAndRestartsWhenBytesGoDown() {
        var meter = RateMeter(window: 5)
        meter.add(totalBytes: 0, at: 100)
        #expect(meter.bytesPerSecond == nil)
        meter.add(totalBytes: 1_000, at: 101)
        #expect(meter.bytesPerSecond == 1_000)
        for second in 2...20 { meter.add(totalBytes: 1_000 + Int64(second - 1) * 5_000, at: 100 + Double(second)) }
        #expect(meter.bytesPerSecond == 5_000)
        meter.add(totalBytes: 100, at: 121)
        #expect(meter.bytesPerSecond == nil)
    }
}
