// Retry-After parsing: delta-seconds or an HTTP-date (IMF-fixdate, RFC 850, asctime).

public enum RetryAfter {
    /// Seconds to wait from `now` (seconds since the Unix epoch). A date in the past gives 0; garbage gives nil.
    public static func parse(_ value: String, now: Double) -> Double? {
        let s = value.trimmingSpaces
        guard !s.isEmpty else { return nil }
        if s.allSatisfy({ $0.isASCII && $0.isNumber }) {
            // Delta-seconds; absurdly long values are clamped rather than rejected.
            guard let n = Int64(s.prefix(12)) else { return nil }
            return Double(n)
        }
        guard let date = HTTPDate.parse(s) else { return nil }
        return max(0, date - now)
    }
}

/// HTTP-date (RFC 9110 §5.6.7) to seconds since the Unix epoch.
public enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    public static func parse(_ value: String) -> Double? {
        let tokens = value.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "\t" }).map(String.init)
        switch tokens.count {
        case 6:
            // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
            guard tokens[5].uppercased() == "GMT", let day = Int(tokens[1]), let month = month(tokens[2]),
                  tokens[3].count == 4, let year = Int(tokens[3]) else { return nil }
            return epoch(year: year, month: month, day: day, time: tokens[4])
        case 4:
            // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
            guard tokens[3].uppercased() == "GMT" else { return nil }
            let parts = tokens[1].split(separator: "-").map(String.init)
            guard parts.count == 3, let day = Int(parts[0]), let month = month(parts[1]), let yy = Int(parts[2])
            else { return nil }
            let year = parts[2].count == 2 ? (yy < 70 ? 2000 + yy : 1900 + yy) : yy
            return epoch(year: year, month: month, day: day, time: tokens[2])
        case 5:
            // asctime: Sun Nov  6 08:49:37 1994
            guard let month = month(tokens[1]), let day = Int(tokens[2]), tokens[4].count == 4,
                  let year = Int(tokens[4]) else { return nil }
            return epoch(year: year, month: month, day: day, time: tokens[3])
        default:
            return nil
        }
    }

    private static func month(_ name: String) -> Int? {
        guard name.count == 3, let i = months.firstIndex(of: name.lowercased()) else { return nil }
        return i + 1
    }

    private static func epoch(year: Int, month: Int, day: Int, time: String) -> Double? {
        let hms = time.split(separator: ":").map { Int($0) }
        guard hms.count == 3, let h = hms[0], let m = hms[1], let s = hms[2],
              (0...23).contains(h), (0...59).contains(m), (0...60).contains(s),
              (1...31).contains(day), year >= 1900, year <= 9999 else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Double(days * 86_400 + h * 3600 + m * 60 + s)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
