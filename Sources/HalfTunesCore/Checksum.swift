// Expected checksums of downloads: "sha256:<hex>" parsed and checked (Checksum+File.swift digests a file).

/// An expected digest, written `sha256:<64 hex digits>` on the wire and in the journal.
public struct Checksum: Sendable, Equatable, CustomStringConvertible {
    public enum Algorithm: String, Sendable { case sha256 }

    public var algorithm: Algorithm
    /// Lowercase hex.
    public var hex: String

    /// Parses `sha256:<64 hex digits>` (hex in any case; the algorithm name in any case). nil when the text
    /// is anything else; `problem(with:)` says why.
    public init?(parsing text: String) {
        guard Self.problem(with: text) == nil, let colon = text.firstIndex(of: ":") else { return nil }
        algorithm = .sha256
        hex = text[text.index(after: colon)...].lowercased()
    }

    public init(algorithm: Algorithm = .sha256, hex: String) {
        self.algorithm = algorithm
        self.hex = hex.lowercased()
    }

    /// `sha256:<lowercase hex>`.
    public var description: String { "\(algorithm.rawValue):\(hex)" }

    /// Why `text` is not a usable checksum, as a sentence completing "checksum ...", or nil when it is.
    public static func problem(with text: String) -> String? {
        guard let colon = text.firstIndex(of: ":") else {
            return "must look like 'sha256:<64 hex digits>' (got '\(text.prefix(80))')"
        }
        let name = text[..<colon].lowercased()
        guard name == Algorithm.sha256.rawValue else {
            return "algorithm '\(name.prefix(20))' is not supported; use 'sha256:<64 hex digits>'"
        }
        let digits = text[text.index(after: colon)...]
        guard digits.utf8.count == 64, digits.utf8.allSatisfy(Self.isHexDigit) else {
            return "must have exactly 64 hex digits after 'sha256:' (got \(digits.utf8.count) characters)"
        }
        return nil
    }

    private static func isHexDigit(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46)
    }
}
