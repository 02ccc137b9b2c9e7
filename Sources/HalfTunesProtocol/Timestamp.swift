#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Timestamps travel as RFC 3339 UTC strings with milliseconds ("2026-11-22T03:51:27.123Z").
public enum Timestamp {
    /// Seconds since 1970 (wall clock).
    public static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Written digit by digit into one 24-byte string (every task description and event carries one or more).
    /// A time outside years 0001–9999 (or not a number: a journal row edited by hand) is written as the nearest
    /// end of that range.
    public static func format(_ seconds: Double) -> String {
        let seconds = seconds.isNaN ? 0 : min(max(seconds, earliest), latest)
        let whole = seconds.rounded(.down)
        var t = time_t(whole)
        // Down to the millisecond, but a microsecond of slack: a time parsed from this text (".757" is stored as
        // .75699996…) is written back as the same text.
        let millis = Int32(min(999, ((seconds - whole) * 1000 + 0.001).rounded(.down)))
        var tm = tm()
        gmtime_r(&t, &tm)
        let year = tm.tm_year + 1900
        return String(unsafeUninitializedCapacity: 24) { buffer in
            var i = 0
            func digits(_ value: Int32, _ width: Int) {
                var v = value
                for j in stride(from: i + width - 1, through: i, by: -1) {
                    buffer[j] = UInt8(ascii: "0") + UInt8(v % 10)
                    v /= 10
                }
                i += width
            }
            func byte(_ c: Unicode.Scalar) {
                buffer[i] = UInt8(ascii: c)
                i += 1
            }
            digits(year, 4); byte("-"); digits(tm.tm_mon + 1, 2); byte("-"); digits(tm.tm_mday, 2); byte("T")
            digits(tm.tm_hour, 2); byte(":"); digits(tm.tm_min, 2); byte(":"); digits(tm.tm_sec, 2); byte(".")
            digits(millis, 3); byte("Z")
            return i
        }
    }

    /// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z.
    static let earliest: Double = -62_135_596_800
    static let latest: Double = 253_402_300_799.9995
}

extension Timestamp {
    /// Seconds since 1970 from an RFC 3339 date-time: `2026-11-22T03:51:27Z`, with optional fractional seconds
    /// and a `Z` or `±hh:mm` offset (`t` and `z` in either case, a space instead of `T`); nil for anything else,
    /// including impossible dates such as February 30th.
    public static func parse(_ text: String) -> Double? {
        let b = Array(text.utf8)
        var i = 0
        func number(_ width: Int) -> Int? {
            guard i + width <= b.count else { return nil }
            var v = 0
            for _ in 0..<width {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b[i]) else { return nil }
                v = v * 10 + Int(b[i] - UInt8(ascii: "0"))
                i += 1
            }
            return v
        }
        func expect(_ options: String) -> Bool {
            guard i < b.count, options.utf8.contains(b[i]) else { return false }
            i += 1
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2),
              expect("Tt "), let hour = number(2), expect(":"), let minute = number(2), expect(":"),
              let second = number(2) else { return nil }
        var fraction = 0.0
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            var scale = 0.1
            let start = i
            while i < b.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b[i]) {
                fraction += Double(b[i] - UInt8(ascii: "0")) * scale
                scale /= 10
                i += 1
            }
            guard i > start else { return nil }
        }
        var offset = 0
        if expect("Zz") {
            offset = 0
        } else {
            guard i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") else { return nil }
            let sign = b[i] == UInt8(ascii: "-") ? -1 : 1
            i += 1
            guard let hours = number(2), expect(":"), let minutes = number(2), hours < 24, minutes < 60 else { return nil }
            offset = sign * (hours * 3600 + minutes * 60)
        }
        guard i == b.count, (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var tm = tm()
        tm.tm_year = Int32(year - 1900)
        tm.tm_mon = Int32(month - 1)
        tm.tm_mday = Int32(day)
        tm.tm_hour = Int32(hour)
        tm.tm_min = Int32(minute)
        tm.tm_sec = Int32(min(second, 59)) // a leap second counts as the last second of its minute
        let seconds = timegm(&tm)
        // timegm normalizes February 30th to March 2nd: such a date is refused, not moved.
        guard tm.tm_mday == Int32(day), tm.tm_mon == Int32(month - 1) else { return nil }
        return Double(seconds) - Double(offset) + fraction
    }
}

/// Durations in seconds turned into the nanoseconds timers take, bounded: a delay read from a journal row, a
/// configuration file or the environment (`WATCHDOG_USEC`) can be anything, and `Int64(x * 1e9)` traps past 292
/// years, on infinity and on NaN.
public enum Seconds {
    /// The longest a timer waits: 30 years.
    public static let longest: Double = 30 * 365 * 86_400

    /// `seconds` as nanoseconds, from 0 (negative or NaN) to `longest`.
    public static func nanoseconds(_ seconds: Double) -> Int64 {
        guard seconds > 0 else { return 0 }
        return Int64(min(seconds, longest) * 1e9)
    }
}
