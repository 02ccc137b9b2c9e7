// Bytes of a response head that are not UTF-8, read as ISO-8859-1 before swift-nio's decoder sees them.
//
// swift-nio's HTTP/1 decoder builds header values with `String(decoding:as: UTF8.self)`: every byte that is not
// part of valid UTF-8 becomes U+FFFD, so `filename="foo-\xE4.html"` (tc2231 `attwithisofnplain`) would name a
// file `foo-�.html`, and two ETags that differ only in such bytes (`"v\xE4"`, `"v\xE5"`) would compare equal.
// RFC 9110 5.5 lets field values carry such `obs-text`, historically ISO-8859-1. This machine re-encodes each
// such byte as the UTF-8 of the Latin-1 character it is (0xE4 → "ä", an injective map), and leaves valid UTF-8,
// and everything after the head, byte for byte as received.

/// Walks the bytes of one connection's responses as they arrive: inside a head (from a response's first byte to
/// the empty line that ends it; an interim 1xx head is followed by another) it re-encodes bytes that are not
/// UTF-8; after it, nothing is touched until `expectHead()` (a request went out) starts the next response.
/// A UTF-8 sequence split between two reads is held back until the next one completes or breaks it.
public struct ResponseHeadRecoder: Sendable, Equatable {
    public enum Output: Sendable, Equatable {
        /// Pass the input on as it came.
        case unchanged
        /// Pass these bytes on instead (possibly none: all of them are held for the next input).
        case replaced([UInt8])
    }

    /// Inside a head; false from the empty line that ends a final (non-1xx) head to `expectHead()`.
    public private(set) var readingHead = true
    /// Bytes of an unfinished UTF-8 sequence at the end of the last input.
    private var held: [UInt8] = []
    /// The start line's first bytes (enough for "HTTP/1.1 100"), to tell an interim response.
    private var startLine: [UInt8] = []
    /// The current line has a byte other than CR; false at a line's start.
    private var lineHasContent = false
    /// The start line ended (empty lines before it are skipped, as the decoder does).
    private var startLineDone = false

    public init() {}

    /// A request went out: the next bytes begin its response's head.
    public mutating func expectHead() {
        self = ResponseHeadRecoder()
    }

    /// The bytes to pass on for `input`.
    public mutating func feed<Bytes: Collection>(_ input: Bytes) -> Output where Bytes.Element == UInt8, Bytes.Index == Int {
        guard readingHead else { return .unchanged }
        var changed = !held.isEmpty
        var out: [UInt8] = []
        let bytes: [UInt8]
        let base: Int
        if held.isEmpty {
            bytes = []
            base = input.startIndex
        } else {
            bytes = held + input
            base = 0
            held = []
        }
        // Reads `bytes` when something was held, else `input` itself (no copy on the common path).
        func byte(_ i: Int) -> UInt8 { bytes.isEmpty ? input[i] : bytes[i] }
        let end = bytes.isEmpty ? input.endIndex : bytes.count
        func copyPrefix(upTo i: Int) {
            guard !changed else { return }
            changed = true
            out.reserveCapacity(end - base + 16)
            for j in base..<i { out.append(byte(j)) }
        }

        var i = base
        while i < end, readingHead {
            let b = byte(i)
            if b < 0x80 {
                if changed { out.append(b) }
                line(b)
                i += 1
                continue
            }
            switch Self.sequenceLength(at: i, end: end, byte: byte) {
            case .valid(let n):
                if changed { for j in i..<(i + n) { out.append(byte(j)) } }
                lineHasContent = true
                i += n
            case .invalid:
                copyPrefix(upTo: i)
                out.append(0xC0 | (b >> 6))
                out.append(0x80 | (b & 0x3F))
                lineHasContent = true
                i += 1
            case .unfinished:
                copyPrefix(upTo: i)
                held = (i..<end).map(byte)
                i = end
            }
        }
        guard changed else { return .unchanged }
        for j in i..<end { out.append(byte(j)) }
        return .replaced(out)
    }

    /// One ASCII byte of a head: tracks lines, and ends the head at its empty line.
    private mutating func line(_ b: UInt8) {
        switch b {
        case UInt8(ascii: "\n"):
            if lineHasContent {
                lineHasContent = false
                startLineDone = true
            } else if startLineDone {
                endOfHead()
            }
        case UInt8(ascii: "\r"):
            break
        default:
            lineHasContent = true
            if !startLineDone, startLine.count < 16 { startLine.append(b) }
        }
    }

    /// An interim response (1xx but 101) is followed by another head; anything else by its body.
    private mutating func endOfHead() {
        if let code = Self.statusCode(startLine), code / 100 == 1, code != 101 {
            self = ResponseHeadRecoder()
        } else {
            readingHead = false
        }
    }

    /// The status code of a start line "HTTP/x.y NNN ...", nil if it has none.
    static func statusCode(_ line: [UInt8]) -> Int? {
        guard let space = line.firstIndex(of: UInt8(ascii: " ")), space + 4 <= line.count else { return nil }
        var code = 0
        for b in line[(space + 1)..<(space + 4)] {
            guard b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") else { return nil }
            code = code * 10 + Int(b - UInt8(ascii: "0"))
        }
        return code
    }

    enum Sequence: Equatable {
        /// A whole UTF-8 sequence of this many bytes.
        case valid(Int)
        /// The lead byte is no UTF-8 (or what follows it breaks the sequence): it is a Latin-1 character.
        case invalid
        /// Valid so far, cut by the end of the input.
        case unfinished
    }

    /// The UTF-8 sequence (RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF) starting at `i`.
    static func sequenceLength(at i: Int, end: Int, byte: (Int) -> UInt8) -> Sequence {
        let lead = byte(i)
        let length: Int
        var second: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; second = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; second = 0x80...0x9F
        case 0xF0: length = 4; second = 0x90...0xBF
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; second = 0x80...0x8F
        default: return .invalid
        }
        for k in 1..<length {
            guard i + k < end else { return .unfinished }
            let range: ClosedRange<UInt8> = k == 1 ? second : 0x80...0xBF
            guard range.contains(byte(i + k)) else { return .invalid }
        }
        return .valid(length)
    }
}
