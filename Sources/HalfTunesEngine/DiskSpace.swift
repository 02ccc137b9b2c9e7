// How much disk a download may take: reservations ahead of received bytes, and the free space kept for everyone.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
import Darwin
#endif
import HalfTunesProtocol

/// The size in bytes of the file system `fs` describes, and what of it an unprivileged writer may still use.
public func fileSystemSize(_ fs: statvfs) -> (total: Int64, available: Int64) {
    let unit = Int64(fs.f_frsize > 0 ? fs.f_frsize : fs.f_bsize)
    return (Int64(fs.f_blocks) * unit, Int64(fs.f_bavail) * unit)
}

/// The free space no download may take (`min-free-space`): room for the journal and every other user. A task
/// whose next write or reservation would leave less free fails that attempt with `diskFull` (transient: it
/// waits and is retried, so it goes on when space returns).
public enum FreeSpaceFloor: Sendable, Equatable, CustomStringConvertible {
    /// 1 GiB, or 5 % of the file system, whichever is less (a 4 GiB SD card keeps ~205 MiB).
    case automatic
    case bytes(Int64)
    /// A percentage of the file system's size (0 < p ≤ 50).
    case percent(Double)

    public static let automaticBytes: Int64 = 1 << 30
    public static let automaticPercent = 5.0

    /// The bytes to keep free on a file system of `size` bytes.
    public func bytes(ofFileSystemSize size: Int64) -> Int64 {
        switch self {
        case .automatic: return min(Self.automaticBytes, Int64(Double(size) * Self.automaticPercent / 100))
        case .bytes(let n): return n
        case .percent(let p): return Int64(Double(size) * p / 100)
        }
    }

    /// `auto`, `0` (none), a size with an optional k, M, G or T suffix (powers of 1024), or a percentage (`5%`).
    public static func parse(_ text: String) -> FreeSpaceFloor? {
        let t = text.trimmingSpaces
        if t.lowercased() == "auto" { return .automatic }
        if t.hasSuffix("%") {
            guard let p = Double(t.dropLast()), p.isFinite, p >= 0, p <= 50 else { return nil }
            return p == 0 ? .bytes(0) : .percent(p)
        }
        let units: [Character: Int64] = ["k": 1 << 10, "K": 1 << 10, "m": 1 << 20, "M": 1 << 20, "g": 1 << 30,
                                         "G": 1 << 30, "t": 1 << 40, "T": 1 << 40]
        var digits = Substring(t), scale: Int64 = 1
        if let last = digits.last, let unit = units[last] {
            scale = unit
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int64(digits),
              n <= Int64.max / scale else { return nil }
        return .bytes(n * scale)
    }

    public var description: String {
        switch self {
        case .automatic: return "auto"
        case .bytes(let n): return "\(n)"
        case .percent(let p): return p == p.rounded() ? "\(Int(p))%" : "\(p)%"
        }
    }
}

/// What a download's partial file reserves on disk (pure; `PartialWriter` carries it out). A server's claimed
/// length never sizes a reservation: blocks are reserved (`fallocate` with `FALLOC_FL_KEEP_SIZE`) at most
/// `window` ahead of the bytes each request actually wrote, up to the claimed end at most, and what was
/// reserved but not written is given back when the transfer stops (`unwritten`).
public struct ReservationPlan: Sendable, Equatable {
    /// How far ahead of a request's written end the file is reserved.
    public static let window: Int64 = 64 << 20
    /// A reservation is extended once less than this is left ahead of a request.
    public static let refill: Int64 = 32 << 20
    /// Less than this left to reserve is not reserved: a small file gains nothing from it.
    public static let minimum: Int64 = 1 << 20

    /// The claimed end of the resource (nil: unknown, nothing is reserved).
    public var limit: Int64?
    /// What is reserved so far.
    public private(set) var reserved = ByteRanges()

    public init(limit: Int64?) {
        self.limit = limit
    }

    /// A request wrote up to `end`: the range to reserve now, if any (at most `window` from `end`, within the
    /// limit, and only once less than `refill` is left reserved ahead). Records it as reserved.
    public mutating func wrote(upTo end: Int64) -> Range<Int64>? {
        guard let limit, end < limit else { return nil }
        let soon = end..<min(limit, end + Self.refill)
        guard !reserved.contains(soon) else { return nil }
        let wanted = end..<min(limit, end + Self.window)
        guard wanted.count >= Self.minimum else { return nil }
        reserved.insert(wanted)
        return wanted
    }

    /// The reserved ranges no byte was written to (to give back when the transfer stops).
    public func unwritten(_ written: ByteRanges) -> [Range<Int64>] {
        guard let end = reserved.ranges.last?.upperBound else { return [] }
        return written.gaps(total: end).flatMap { gap in
            ByteRanges([gap]).intersection(reserved).ranges
        }
    }
}
