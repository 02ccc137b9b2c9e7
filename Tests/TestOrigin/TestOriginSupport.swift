// Helpers for TestOrigin: SHA-256 hex, deterministic random bytes, IMF-fixdate formatting and parsing.
import Crypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension TestOrigin {
    /// Lower-case hex SHA-256 of `bytes`.
    public static func sha256Hex(_ bytes: [UInt8]) -> String {
        hex(SHA256.hash(data: bytes))
    }

    static func hex<S: Sequence>(_ digest: S) -> String where S.Element == UInt8 {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        for byte in digest {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Deterministic pseudo-random bytes (splitmix64 stream seeded with `seed`); fast enough for 100+ MiB.
    public static func randomBytes(count: Int, seed: UInt64) -> [UInt8] {
        precondition(count >= 0, "randomBytes: count must be >= 0")
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var state = seed
            var index = 0
            guard let base = buffer.baseAddress else {
                initialized = 0
                return
            }
            while index < count {
                state &+= 0x9E37_79B9_7F4A_7C15
                var z = state
                z = (z ^ (z &>> 30)) &* 0xBF58_476D_1CE4_E5B9
                z = (z ^ (z &>> 27)) &* 0x94D0_49BB_1331_11EB
                z = z ^ (z &>> 31)
                let n = min(8, count - index)
                if n == 8 {
                    UnsafeMutableRawPointer(base + index).storeBytes(of: z.littleEndian, as: UInt64.self)
                } else {
                    for k in 0..<n { base[index + k] = UInt8(truncatingIfNeeded: z >> (8 * UInt64(k))) }
                }
                index += n
            }
            initialized = count
        }
    }
}

/// Seconds since 1970 with sub-second precision (CLOCK_REALTIME), to time requests.
func wallClockSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// The calling thread's Linux thread id, read from /proc/thread-self; nil where that does not exist.
func currentThreadID() -> Int? {
    var buffer = [CChar](repeating: 0, count: 64)
    let n = readlink("/proc/thread-self", &buffer, buffer.count - 1)
    guard n > 0 else { return nil }
    let link = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)  // "PID/task/TID"
    return link.split(separator: "/").last.flatMap { Int($0) }
}

/// IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") to and from seconds since 1970.
enum HTTPDate {
    private static let days = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]  // 1970-01-01 was a Thursday
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    static func now() -> Int64 { Int64(time(nil)) }

    static func format(_ seconds: Int64) -> String {
        let dayNumber = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
        let secondOfDay = seconds - dayNumber * 86400
        let (y, m, d) = civil(fromDays: dayNumber)
        let weekday = days[Int(((dayNumber % 7) + 7) % 7)]
        func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let time = "\(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60))"
        return "\(weekday), \(two(d)) \(months[Int(m) - 1]) \(y) \(time) GMT"
    }

    static func parse(_ text: String) -> Int64? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT",
            let d = Int64(parts[1]), let m = months.firstIndex(of: String(parts[2])), let y = Int64(parts[3])
        else { return nil }
        let hms = parts[4].split(separator: ":").compactMap { Int64($0) }
        guard hms.count == 3 else { return nil }
        return days(fromCivil: y, Int64(m + 1), d) * 86400 + hms[0] * 3600 + hms[1] * 60 + hms[2]
    }

    // Howard Hinnant's civil-date algorithms.
    private static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    private static func days(fromCivil y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
