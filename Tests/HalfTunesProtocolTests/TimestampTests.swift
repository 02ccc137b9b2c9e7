// RFC 3339 timestamps: what `format` writes, `parse` reads back; offsets, fractions and impossible dates.
import HalfTunesProtocol
import Testing

@Suite struct TimestampTests {
    @Test func parseReadsWhatFormatWrites() {
        for seconds in [0.0, 1_764_041_487.123, 1_000_000_000.5, 4_102_444_799.999] {
            let text = Timestamp.format(seconds)
            let back = Timestamp.parse(text)
            #expect(back.map { abs($0 - seconds) < 0.001 } == true, "\(text) → \(String(describing: back))")
        }
        for text in ["2026-11-25T10:59:46.757Z", "2026-11-25T10:59:46.999Z", "2026-11-25T10:59:46.001Z"] {
            #expect(Timestamp.parse(text).map(Timestamp.format) == text, "written back as it was read")
        }
    }

    @Test func offsetsFractionsAndSpellings() {
        let utc = 1_764_108_000.0 // 2025-11-25T22:00:00Z
        #expect(Timestamp.parse("2025-11-25T22:00:00Z") == utc)
        #expect(Timestamp.parse("2025-11-25t22:00:00z") == utc)
        #expect(Timestamp.parse("2025-11-25 22:00:00Z") == utc)
        #expect(Timestamp.parse("2025-11-25T23:00:00+01:00") == utc)
        #expect(Timestamp.parse("2025-11-25T17:30:00-04:30") == utc)
        #expect(Timestamp.parse("2025-11-25T22:00:00.25Z") == utc + 0.25)
        #expect(Timestamp.parse("2024-02-29T00:00:00Z") != nil, "a leap day")
        #expect(Timestamp.parse("2016-12-31T23:59:60Z") == Timestamp.parse("2016-12-31T23:59:59Z"), "a leap second")
    }

    @Test func anythingElseIsRefused() {
        for text in ["", "2025-11-25", "2025-11-25T22:00:00", "2025-11-25T22:00Z", "2025-02-30T00:00:00Z",
                     "2025-13-01T00:00:00Z", "2025-11-25T24:00:00Z", "2025-11-25T22:00:00.Z", "2025-11-25T22:00:00+1:00",
                     "2025-11-25T22:00:00+01:00 ", " 2025-11-25T22:00:00Z", "tomorrow", "2025-11-25T22:00:00+25:00"] {
            #expect(Timestamp.parse(text) == nil, "'\(text)'")
        }
    }
}
