// Rates as people write them ("512k", "2M", "1.5G"): shared by the configuration file and halftunesctl.

/// Bandwidth values in text. Suffixes are binary, like curl's `--limit-rate`: `k`/`K` = 1024, `M` = 1024²,
/// `G` = 1024³ bytes per second; a plain number is bytes per second. An optional trailing `B`, `B/s` or
/// `/s` is allowed ("2MB/s"). `0` (or `none`, `unlimited`) means no limit.
public enum ByteRate {
    /// The smallest limit accepted (bytes per second); 0 means unlimited.
    public static let minimumLimit: Int64 = 1024
    /// The largest value accepted (1 PiB/s).
    public static let maximumLimit: Int64 = 1 << 50

    /// Bytes per second, or nil when `text` is not a rate.
    public static func parse(_ text: String) -> Int64? {
        var s = Substring(text.trimmingWhitespace)
        if ["none", "unlimited"].contains(s.lowercased()) { return 0 }
        for tail in ["B/s", "/s", "B"] where s.hasSuffix(tail) && s.count > tail.count {
            s = s.dropLast(tail.count)
            break
        }
        var multiplier: Double = 1
        if let last = s.last {
            switch last {
            case "k", "K": multiplier = 1024
            case "m", "M": multiplier = 1024 * 1024
            case "g", "G": multiplier = 1024 * 1024 * 1024
            default: break
            }
            if multiplier != 1 { s = s.dropLast() }
        }
        guard !s.isEmpty, s.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              let number = Double(s), number.isFinite, number >= 0 else { return nil }
        let value = (number * multiplier).rounded()
        guard value <= Double(maximumLimit) else { return nil }
        return Int64(value)
    }

    /// Why `value` is not a usable limit (completing "... must be ..."), or nil.
    public static func problem(with value: Int64) -> String? {
        if value == 0 || (minimumLimit...maximumLimit).contains(value) { return nil }
        return "0 (unlimited) or from \(minimumLimit) bytes per second (1k) up to 1 PiB/s (got \(value))"
    }

    /// "2 MiB/s", "512 KiB/s", "1000 B/s", "unlimited" (powers of 1024, up to two decimals).
    public static func format(_ bytesPerSecond: Int64) -> String {
        guard bytesPerSecond > 0 else { return "unlimited" }
        let units = ["B/s", "KiB/s", "MiB/s", "GiB/s", "TiB/s", "PiB/s"]
        var value = Double(bytesPerSecond)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        let hundredths = Int((value * 100).rounded())
        var number = "\(hundredths / 100)"
        let fraction = hundredths % 100
        if fraction != 0 {
            number += fraction % 10 == 0 ? ".\(fraction / 10)" : (fraction < 10 ? ".0\(fraction)" : ".\(fraction)")
        }
        return "\(number) \(units[unit])"
    }
}

extension String {
    fileprivate var trimmingWhitespace: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}
