// JSON text straight into a JSONValue: what every request line and every encoded result goes through.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Parses JSON (RFC 8259) into a `JSONValue` in one pass over the bytes, without Codable. It gives exactly what
/// decoding `JSONValue` with `JSONDecoder` gives (JSONParserTests compares them), except that a trailing comma in an
/// array or object is an error, as RFC 8259 and JSONTestSuite say (JSONDecoder tolerates it); a repeated member name
/// keeps its first value, as JSONDecoder does; an integer that fits in 64 bits is `.int` (also when written
/// `1.0` or `1e3`), any other number `.double`, strings must be valid UTF-8 without raw control characters and
/// with well-formed `\u` surrogate pairs, numbers must be finite, nesting is limited to `maxDepth` — at a
/// fraction of the cost: JSONValue's Codable decoding tries bool, integer, double, string and array before it
/// finds an object, and each failed try builds an error.
public enum JSONParser {
    /// Arrays and objects nested deeper than this are refused (as JSONDecoder refuses them).
    public static let maxDepth = 512

    public struct Failure: Error, Equatable, CustomStringConvertible {
        public var offset: Int
        public var reason: String
        public var description: String { "invalid JSON at byte \(offset): \(reason)" }
    }

    public static func parse(_ bytes: some Collection<UInt8>) throws(Failure) -> JSONValue {
        let result: Result<JSONValue, Failure>? = bytes.withContiguousStorageIfAvailable { buffer in
            var parser = Parser(buffer)
            return Result { () throws(Failure) -> JSONValue in try parser.document() }
        }
        if let result { return try result.get() }
        let copy = Array(bytes)
        return try copy.withUnsafeBufferPointer { buffer throws(Failure) -> JSONValue in
            var parser = Parser(buffer)
            return try parser.document()
        }
    }

    private struct Parser {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0
        var depth = 0

        init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        func fail(_ reason: String) -> Failure { Failure(offset: index, reason: reason) }

        mutating func document() throws(Failure) -> JSONValue {
            let value = try self.value()
            skipWhitespace()
            guard index == bytes.count else { throw fail("unexpected data after the value") }
            return value
        }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func value() throws(Failure) -> JSONValue {
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of the text") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try object()
            case UInt8(ascii: "["): return try array()
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
            default: throw fail("unexpected character")
            }
        }

        mutating func literal(_ word: StaticString) throws(Failure) {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { throw fail("unexpected end of the text") }
            for i in 0..<count where bytes[index + i] != word.utf8Start[i] { throw fail("unexpected character") }
            index += count
        }

        mutating func enter() throws(Failure) {
            depth += 1
            guard depth <= JSONParser.maxDepth else { throw fail("nested more than \(JSONParser.maxDepth) deep") }
        }

        mutating func object() throws(Failure) -> JSONValue {
            try enter()
            index += 1
            var members: [String: JSONValue] = [:]
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                depth -= 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a member name") }
                let key = try string()
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                index += 1
                let member = try value()
                if members[key] == nil { members[key] = member } // a repeated name: the first counts
                skipWhitespace()
                guard index < bytes.count else { throw fail("unexpected end of the text") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                guard bytes[index] == UInt8(ascii: "}") else { throw fail("expected ',' or '}'") }
                index += 1
                depth -= 1
                return .object(members)
            }
        }

        mutating func array() throws(Failure) -> JSONValue {
            try enter()
            index += 1
            var elements: [JSONValue] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                depth -= 1
                return .array(elements)
            }
            while true {
                elements.append(try value())
                skipWhitespace()
                guard index < bytes.count else { throw fail("unexpected end of the text") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                guard bytes[index] == UInt8(ascii: "]") else { throw fail("expected ',' or ']'") }
                index += 1
                depth -= 1
                return .array(elements)
            }
        }

        /// A string, `index` at its opening quote.
        mutating func string() throws(Failure) -> String {
            index += 1
            let start = index
            // Fast path: no escapes.
            while index < bytes.count {
                let b = bytes[index]
                if b == UInt8(ascii: "\"") {
                    let text = String(validating: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                    guard let text else { throw fail("a string is not valid UTF-8") }
                    index += 1
                    return text
                }
                if b == UInt8(ascii: "\\") { break }
                guard b >= 0x20 else { throw fail("a control character in a string") }
                index += 1
            }
            var utf8 = Array(bytes[start..<index])
            while index < bytes.count {
                let b = bytes[index]
                switch b {
                case UInt8(ascii: "\""):
                    index += 1
                    guard let text = String(validating: utf8, as: UTF8.self) else { throw fail("a string is not valid UTF-8") }
                    return text
                case UInt8(ascii: "\\"):
                    index += 1
                    guard index < bytes.count else { throw fail("unexpected end of the text") }
                    let e = bytes[index]
                    index += 1
                    switch e {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(e)
                    case UInt8(ascii: "b"): utf8.append(0x08)
                    case UInt8(ascii: "f"): utf8.append(0x0C)
                    case UInt8(ascii: "n"): utf8.append(0x0A)
                    case UInt8(ascii: "r"): utf8.append(0x0D)
                    case UInt8(ascii: "t"): utf8.append(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = UInt32(try hex4())
                        if (0xD800..<0xDC00).contains(scalar) {
                            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                            else { throw fail("a high surrogate without its low surrogate") }
                            index += 2
                            let low = UInt32(try hex4())
                            guard (0xDC00..<0xE000).contains(low) else { throw fail("a high surrogate without its low surrogate") }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        } else if (0xDC00..<0xE000).contains(scalar) {
                            throw fail("a low surrogate without its high surrogate")
                        }
                        guard let s = Unicode.Scalar(scalar) else { throw fail("an invalid \\u escape") }
                        utf8.append(contentsOf: UTF8.encode(s)!)
                    default:
                        throw fail("an invalid escape")
                    }
                default:
                    guard b >= 0x20 else { throw fail("a control character in a string") }
                    utf8.append(b)
                    index += 1
                }
            }
            throw fail("an unterminated string")
        }

        mutating func hex4() throws(Failure) -> UInt16 {
            guard index + 4 <= bytes.count else { throw fail("unexpected end of the text") }
            var value: UInt16 = 0
            for _ in 0..<4 {
                let b = bytes[index]
                let digit: UInt8
                switch b {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = b - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = b - UInt8(ascii: "A") + 10
                default: throw fail("an invalid \\u escape")
                }
                value = value << 4 | UInt16(digit)
                index += 1
            }
            return value
        }

        mutating func number() throws(Failure) -> JSONValue {
            let start = index
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("a malformed number") }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else {
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            }
            var integral = true
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                integral = false
                index += 1
                guard index < bytes.count, isDigit(bytes[index]) else { throw fail("a malformed number") }
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                integral = false
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                guard index < bytes.count, isDigit(bytes[index]) else { throw fail("a malformed number") }
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            if integral, let int = Int64(text) { return .int(int) }
            guard let double = Double(text), double.isFinite else {
                index = start
                throw fail("a number that cannot be represented")
            }
            if let int = Int64(exactly: double) { return .int(int) }
            return .double(double)
        }

        func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
    }
}
