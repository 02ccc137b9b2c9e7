// The free space no download may take (`min-free-space`), parsed and sized.

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
