// Paths as the kernel reads them: split and compared by bytes, never by Swift's characters.

/// Paths split as the kernel reads them: at `/` bytes. Swift's characters join a `/` with a combining mark after
/// it (`"/\u{334}"` is one Character, not `"/"`), so a split by Character could hand `openat` a name with a `/` in it.
public enum PathBytes {
    /// The components of `path` between its `/` bytes, empty ones left out.
    public static func components(_ path: String) -> [String] {
        Array(path.utf8).split(separator: UInt8(ascii: "/")).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Whether `path` is `root` or below it, byte for byte (`hasPrefix` compares characters, and canonically
    /// equivalent ones alike: `é` and `e` + U+0301 are one to it and two directories to the kernel).
    public static func isInside(_ path: String, _ root: String) -> Bool {
        let p = Array(path.utf8), r = Array(root.utf8)
        guard p.starts(with: r) else { return false }
        return p.count == r.count || r.last == UInt8(ascii: "/") || p[r.count] == UInt8(ascii: "/")
    }

    /// The components of `path` below `root` (which `path` starts with, byte for byte).
    public static func components(of path: String, below root: String) -> [String] {
        components(String(decoding: Array(path.utf8).dropFirst(root.utf8.count), as: UTF8.self))
    }

    /// The directory of `path`: what comes before its last `/` (`/` when that is the first byte), `.` without one.
    public static func directory(of path: String) -> String {
        guard let (before, _) = splitLast(path) else { return "." }
        return before.isEmpty ? "/" : before
    }

    /// What comes before the last `/` byte of `path` ("" when it is the first) and after it; nil without one.
    public static func splitLast(_ path: String) -> (before: String, after: String)? {
        let bytes = Array(path.utf8)
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return nil }
        return (String(decoding: bytes[..<slash], as: UTF8.self), String(decoding: bytes[(slash + 1)...], as: UTF8.self))
    }
}
