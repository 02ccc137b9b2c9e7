// Lower-case hex text of bytes: one encoder for digests, Digest authentication and random tokens.

public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    /// "00ff…" for the bytes, two lower-case digits each.
    public static func string<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var text: [UInt8] = []
        text.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// `count` random bytes from the system's generator, as hex (2 × `count` digits).
    public static func random(bytes count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return string((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }
}
