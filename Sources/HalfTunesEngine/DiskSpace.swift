// How much disk a download may take: reservations ahead of received bytes, and file system sizes (the free space
// kept for everyone is HalfTunesCore's FreeSpaceFloor).
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
