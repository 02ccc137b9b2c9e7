// What one user's unfinished downloads may hold on disk (`max-disk-per-uid`), counted per partial file.
import HalfTunesCore
import HalfTunesProtocol
import NIOConcurrencyHelpers

/// The bytes each uid's partial files (unfinished downloads and kept resume data) may hold at once. Under the
/// system daemon every partial belongs to `halftunesd`, so per-user disk quotas do not apply: this does.
public enum DiskLimit: Sendable, Equatable, CustomStringConvertible {
    case unlimited
    case bytes(Int64)
    /// A percentage (0 < p ≤ 100) of the downloads directory's file system, read at start.
    case percent(Double)

    /// The default: a fifth of the downloads file system per user (the daemon's own uid and root: unlimited).
    public static let standard = DiskLimit.percent(20)

    /// The bytes on a file system of `size` bytes; nil: no limit.
    public func bytes(ofFileSystemSize size: Int64) -> Int64? {
        switch self {
        case .unlimited: return nil
        case .bytes(let n): return n
        case .percent(let p): return Int64(Double(size) * p / 100)
        }
    }

    /// `unlimited`, a size above 0 with an optional k, M, G or T suffix (powers of 1024), or a percentage (`20%`).
    public static func parse(_ text: String) -> DiskLimit? {
        let t = text.trimmingSpaces
        if t.lowercased() == "unlimited" { return .unlimited }
        if t.hasSuffix("%") {
            guard let p = Double(t.dropLast()), p.isFinite, p > 0, p <= 100 else { return nil }
            return .percent(p)
        }
        guard case .bytes(let n)? = FreeSpaceFloor.parse(t), n > 0 else { return nil } // 0 would refuse every byte
        return .bytes(n)
    }

    public var description: String {
        switch self {
        case .unlimited: return "unlimited"
        case .bytes(let n): return "\(n)"
        case .percent(let p): return p == p.rounded() ? "\(Int(p))%" : "\(p)%"
        }
    }
}

/// The daemon's count of the bytes each uid's partial files hold, per file (keyed by its path): every write
/// or reservation past what a file holds asks it first, so a uid's partials and resume data never hold more
/// than its limit together, however many downloads write at once. O(1) per call, under one lock.
///
/// Charges come from the writers (`PartialWriter`: what the file holds once opened, each reservation, each
/// write past them, what is left when it stops) and from the daemon (the journal's durable bytes at start,
/// a file removed, published, or moved to another task by resume data).
public final class DiskLedger: Sendable {
    private struct State {
        var charges: [String: (uid: UInt32, bytes: Int64)] = [:]
        var totals: [UInt32: Int64] = [:]
    }
    private let state = NIOLockedValueBox(State())
    private let limitBytes: Int64?
    private let exempt: Set<UInt32>

    /// `limit` bytes for every uid but the `exempt` ones (nil: nobody is limited, nothing is counted).
    public init(limit: Int64?, exempt: Set<UInt32>) {
        self.limitBytes = limit
        self.exempt = exempt
    }

    /// Whether some uid is limited.
    public var limitsAnyone: Bool { limitBytes != nil }

    /// The bytes `uid`'s partial files may hold; nil: unlimited (nothing of it is counted).
    public func limit(for uid: UInt32) -> Int64? { exempt.contains(uid) ? nil : limitBytes }

    /// The bytes `uid`'s partial files hold.
    public func charged(_ uid: UInt32) -> Int64 { state.withLockedValue { $0.totals[uid] ?? 0 } }

    /// An account for one partial file of `uid`; nil when the uid is not limited.
    public func account(uid: UInt32, path: String) -> DiskAccount? {
        limit(for: uid) == nil ? nil : DiskAccount(ledger: self, uid: uid, path: path)
    }

    /// What the file at `path` holds now, whatever the limit (the bytes are there).
    public func set(_ path: String, uid: UInt32, bytes: Int64) {
        guard limit(for: uid) != nil else { return }
        state.withLockedValue { s in
            Self.drop(path, from: &s)
            guard bytes > 0 else { return }
            s.charges[path] = (uid, bytes)
            s.totals[uid] = Self.sum(s.totals[uid] ?? 0, bytes)
        }
    }

    /// Lets the file at `path` hold up to `wanted` bytes as far as its uid's limit allows: all of it, or (when
    /// `partly`) as much as is left. Returns what the file may hold now (never less than before).
    public func grow(_ path: String, uid: UInt32, to wanted: Int64, partly: Bool) -> Int64 {
        guard let limit = limit(for: uid) else { return wanted }
        return state.withLockedValue { s in
            let old = s.charges[path]?.bytes ?? 0
            guard wanted > old else { return old }
            let room = limit - (s.totals[uid] ?? 0)
            let granted = wanted - old <= room ? wanted : (partly ? old + max(0, room) : old)
            guard granted > old else { return old }
            s.charges[path] = (uid, granted)
            s.totals[uid] = Self.sum(s.totals[uid] ?? 0, granted - old)
            return granted
        }
    }

    /// The file at `path` is gone (removed, or published: no longer a partial).
    public func remove(_ path: String) {
        state.withLockedValue { Self.drop(path, from: &$0) }
    }

    /// The file at `from` is now at `to`, a partial of `uid` (resume data adopted by a new task).
    public func move(from: String, to: String, uid: UInt32) {
        let limited = limit(for: uid) != nil
        state.withLockedValue { s in // one step: no other writer takes the room in between
            let bytes = s.charges[from]?.bytes ?? 0
            Self.drop(from, from: &s)
            Self.drop(to, from: &s)
            guard limited, bytes > 0 else { return }
            s.charges[to] = (uid, bytes)
            s.totals[uid] = Self.sum(s.totals[uid] ?? 0, bytes)
        }
    }

    /// Totals saturate: files a user made sparse and huge (st_size near 2^63) must not trap the sum.
    private static func sum(_ a: Int64, _ b: Int64) -> Int64 {
        let (r, overflow) = a.addingReportingOverflow(b)
        return overflow ? Int64.max : r
    }

    private static func drop(_ path: String, from s: inout State) {
        guard let old = s.charges.removeValue(forKey: path) else { return }
        let total = (s.totals[old.uid] ?? 0) - old.bytes
        s.totals[old.uid] = total > 0 ? total : nil
    }
}

/// One partial file's place in the `DiskLedger` (handed to its writer).
public struct DiskAccount: Sendable, Equatable {
    let ledger: DiskLedger
    public let uid: UInt32
    public let path: String

    /// The uid's limit.
    public var limit: Int64 { ledger.limit(for: uid) ?? .max }
    /// What the uid's partials hold now.
    public var charged: Int64 { ledger.charged(uid) }

    public static func == (a: DiskAccount, b: DiskAccount) -> Bool {
        a.ledger === b.ledger && a.uid == b.uid && a.path == b.path
    }

    func set(_ bytes: Int64) { ledger.set(path, uid: uid, bytes: bytes) }
    func grow(to wanted: Int64, partly: Bool) -> Int64 { ledger.grow(path, uid: uid, to: wanted, partly: partly) }
}
