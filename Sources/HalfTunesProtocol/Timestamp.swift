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
    public static func format(_ seconds: Double) -> String {
        let whole = seconds.rounded(.down)
        var t = time_t(whole)
        let millis = Int32(((seconds - whole) * 1000).rounded(.down))
        var tm = tm()
        gmtime_r(&t, &tm)
        let year = tm.tm_year + 1900
        guard (0...9999).contains(year) else { return formatSlowly(tm: tm, millis: millis) }
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

    private static func formatSlowly(tm: tm, millis: Int32) -> String {
        func pad(_ v: Int32, _ w: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, w - s.count)) + s
        }
        return "\(pad(tm.tm_year + 1900, 4))-\(pad(tm.tm_mon + 1, 2))-\(pad(tm.tm_mday, 2))T"
            + "\(pad(tm.tm_hour, 2)):\(pad(tm.tm_min, 2)):\(pad(tm.tm_sec, 2)).\(pad(millis, 3))Z"
    }
}
