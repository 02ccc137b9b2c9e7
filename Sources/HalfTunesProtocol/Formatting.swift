#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Human-readable sizes, percentages, rates, durations and progress bars (decimal SI units),
/// shared by halftunesctl and any client that shows transfers.
public enum Formatting {
    private static let units = ["B", "kB", "MB", "GB", "TB", "PB", "EB"]

    /// "999 B", "1.0 kB", "12.4 MB" (powers of 1000, one decimal).
    public static func bytes(_ count: Int64) -> String {
        if count < 0 { return "-" + bytes(count == .min ? .max : -count) }
        if count < 1000 { return "\(count) B" }
        var scale = 1000.0
        var unit = 1
        while true {
            let tenths = Int64((Double(count) / scale * 10).rounded())
            if tenths < 10_000 || unit == units.count - 1 { return "\(oneDecimal(tenths)) \(units[unit])" }
            scale *= 1000
            unit += 1
        }
    }

    /// "45.3%", rounded down so that "100.0%" means complete; nil when the total is unknown.
    public static func percent(_ received: Int64, of expected: Int64?) -> String? {
        guard let fraction = fraction(received, of: expected) else { return nil }
        return "\(oneDecimal(Int64((fraction * 1000).rounded(.down))))%"
    }

    /// The done fraction in 0...1; nil when the total is unknown.
    public static func fraction(_ received: Int64, of expected: Int64?) -> Double? {
        guard let expected, expected >= 0 else { return nil }
        if expected == 0 { return 1 }
        return min(1, max(0, Double(received) / Double(expected)))
    }

    /// "45.3% of 12.4 MB", or "3.1 MB of unknown size".
    public static func progress(received: Int64, expected: Int64?) -> String {
        if let expected, let percent = percent(received, of: expected) {
            return "\(percent) of \(bytes(expected))"
        }
        return "\(bytes(received)) of unknown size"
    }

    /// "3.2 MB/s".
    public static func rate(_ bytesPerSecond: Double) -> String {
        guard bytesPerSecond.isFinite, bytesPerSecond > 0 else { return "0 B/s" }
        return bytes(Int64(min(bytesPerSecond.rounded(), Double(Int64.max / 2)))) + "/s"
    }

    /// "0s", "45s", "3m 05s", "2h 03m", "3d 04h".
    public static func duration(_ seconds: Double) -> String {
        // Past 10,000 years (a server's claimed length over a trickle) it says so: Int64(seconds) would trap.
        guard seconds.isFinite, seconds < Self.longestDuration else { return "∞" }
        let total = Int64(max(0, seconds).rounded())
        let (days, hours, minutes, secs) = (total / 86_400, total / 3600 % 24, total / 60 % 60, total % 60)
        if total < 60 { return "\(secs)s" }
        if total < 3600 { return "\(minutes)m \(pad2(secs))s" }
        if total < 86_400 { return "\(total / 3600)h \(pad2(minutes))m" }
        return "\(days)d \(pad2(hours))h"
    }

    /// The longest duration written out (10,000 years, in seconds); longer ones are "∞".
    static let longestDuration: Double = 10_000 * 365.25 * 86_400

    /// Time left at `bytesPerSecond` ("1m 20s"); nil when the total is unknown or nothing moves.
    public static func eta(received: Int64, expected: Int64?, bytesPerSecond: Double?) -> String? {
        guard let expected, let bytesPerSecond, bytesPerSecond > 0, expected >= received else { return nil }
        return duration(Double(expected - received) / bytesPerSecond)
    }

    /// "[=========>          ]" with `width` cells inside the brackets; all dots when the fraction is unknown.
    public static func progressBar(fraction: Double?, width: Int) -> String {
        let width = max(1, width)
        guard let fraction else { return "[" + String(repeating: "·", count: width) + "]" }
        let filled = Int((min(1, max(0, fraction)) * Double(width)).rounded(.down))
        if filled >= width { return "[" + String(repeating: "=", count: width) + "]" }
        return "[" + String(repeating: "=", count: filled) + ">" + String(repeating: " ", count: width - filled - 1) + "]"
    }

    /// Seconds since 1970 of an RFC 3339 timestamp ("2026-11-22T03:51:27.123Z" or with "+02:00").
    public static func parseTimestamp(_ text: String) -> Double? {
        let chars = Array(text.utf8)
        func number(_ start: Int, _ count: Int) -> Int32? {
            guard start + count <= chars.count else { return nil }
            var value: Int32 = 0
            for c in chars[start..<start + count] {
                guard c >= 48 && c <= 57 else { return nil }
                value = value * 10 + Int32(c - 48)
            }
            return value
        }
        guard chars.count >= 20, let year = number(0, 4), chars[4] == 45, let month = number(5, 2), chars[7] == 45,
              let day = number(8, 2), chars[10] == 84 || chars[10] == 116 || chars[10] == 32,
              let hour = number(11, 2), chars[13] == 58, let minute = number(14, 2), chars[16] == 58,
              let second = number(17, 2) else { return nil }
        var index = 19
        var fractionValue = 0.0
        if chars[index] == 46 {
            index += 1
            var scale = 0.1
            while index < chars.count, chars[index] >= 48, chars[index] <= 57 {
                fractionValue += Double(chars[index] - 48) * scale
                scale /= 10
                index += 1
            }
        }
        guard index < chars.count else { return nil }
        var offset = 0
        if chars[index] == 43 || chars[index] == 45 {
            guard let oh = number(index + 1, 2), index + 3 < chars.count, chars[index + 3] == 58,
                  let om = number(index + 4, 2), index + 6 == chars.count else { return nil }
            offset = Int(oh) * 3600 + Int(om) * 60
            if chars[index] == 45 { offset = -offset }
        } else {
            guard chars[index] == 90 || chars[index] == 122, index + 1 == chars.count else { return nil }
        }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = month - 1
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        let seconds = timegm(&parts)
        return Double(seconds) - Double(offset) + fractionValue
    }

    /// "in 12s", "3m 05s ago", or "now", from `now` to `target` (both seconds since 1970).
    public static func relative(_ target: Double, now: Double) -> String {
        let delta = target - now
        if abs(delta) < 0.5 { return "now" }
        return delta > 0 ? "in \(duration(delta))" : "\(duration(-delta)) ago"
    }

    private static func oneDecimal(_ tenths: Int64) -> String { "\(tenths / 10).\(tenths % 10)" }
    private static func pad2(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
}
