import Foundation
import Testing
@testable import HalfTunesProtocol

/// The parser gives what decoding `JSONValue` with `JSONDecoder` gives (it replaced it on every request line and
/// every encoded result), on hand-picked edge cases and on random documents.
@Suite("JSONParser")
struct JSONParserTests {
    /// JSONDecoder's answer for the same text: the value, or nil for an error.
    static func reference(_ text: [UInt8]) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(text))
    }

    static func parsed(_ text: [UInt8]) -> JSONValue? {
        try? JSONParser.parse(text)
    }

    @Test(arguments: [
        "null", "true", "false", "0", "-0", "7", "-12", "1.5", "-0.25", "1.0", "2.50", "1e3", "1E+2", "-1e-2", "1.5e3",
        "9223372036854775807", "-9223372036854775808", "9223372036854775808", "123456789012345678901234567890",
        "1e300", "1e999", "-1e999", "1e-400", "0.1", "3.141592653589793", "01", "1.", ".5", "-", "+1", "1e", "0x10",
        #""""#, #""a""#, #""é ü 日本 🎵""#, #""\u00e9\u65e5\ud83c\udfb5""#, #""\ud83c""#, #""\udfb5""#, #""\ud83cx""#,
        #""\n\t\r\b\f\/\\\"""#, #""\x""#, #""\u12""#, #""\u12G4""#, "\"a\u{01}b\"", #""unterminated"#,
        "[]", "{}", "[1,2,3]", "[1,,]", "[,]", "[,1]", "{,}", "{\"a\":1,,}", "{\"a\" 1}", "{1:2}", "{\"a\":1,\"a\":2}",
        " \t\n{\"k\" : [ null , true ] }\r\n ", "[1] x", "", "   ", "nul", "truex", "[[[[]]]]",
        #"{"jsonrpc":"2.0","id":1,"method":"task.get","params":{"id":1e300}}"#,
    ])
    func edgeCasesAgreeWithJSONDecoder(_ text: String) {
        let bytes = Array(text.utf8)
        #expect(Self.parsed(bytes) == Self.reference(bytes), "\(text)")
    }

    /// A trailing comma is an error (RFC 8259's grammar; JSONTestSuite's n_array_extra_comma, n_object_trailing_comma),
    /// where JSONDecoder tolerates it: the one place the parser differs from it, on purpose.
    @Test(arguments: ["[1,]", "{\"a\":1,}", "[1, ]", "{\"a\":[1,],\"b\":2}", "[[],]", "{\"a\":{},\n}",
                      #"{"jsonrpc":"2.0","id":1,"method":"daemon.status",}"#])
    func aTrailingCommaIsAnError(_ text: String) {
        let bytes = Array(text.utf8)
        #expect(Self.parsed(bytes) == nil, "\(text)")
        #expect(Self.reference(bytes) != nil, "JSONDecoder tolerates \(text)")
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse(bytes) }
    }

    @Test func invalidUTF8AndDeepNestingAreRefusedLikeJSONDecoder() {
        for bytes: [UInt8] in [[0xFF, 0xFE, 0x7B, 0x7D], [0x22, 0xC3, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22]] {
            #expect(Self.parsed(bytes) == nil && Self.reference(bytes) == nil)
        }
        let ok = String(repeating: "[", count: JSONParser.maxDepth) + String(repeating: "]", count: JSONParser.maxDepth)
        #expect(Self.parsed(Array(ok.utf8)) != nil)
        for depth in [JSONParser.maxDepth + 1, 5_000, 100_000] {
            let deep = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
            #expect(Self.parsed(Array(deep.utf8)) == nil)
        }
    }

    /// Random documents, written both compactly and with whitespace, parse to what JSONDecoder reads.
    @Test func randomDocumentsAgreeWithJSONDecoder() {
        var rng = Generator(seed: 0xC0FFEE)
        for _ in 0..<500 {
            let text = Array(rng.document(depth: 0).utf8)
            let expected = Self.reference(text)
            #expect(expected != nil, "the generator wrote invalid JSON: \(String(decoding: text, as: UTF8.self))")
            #expect(Self.parsed(text) == expected, "\(String(decoding: text, as: UTF8.self))")
        }
    }

    /// `JSONValue(encoding:)`, now parsed by JSONParser, still gives what the encoder wrote.
    @Test func encodingGoesThroughTheParser() throws {
        struct Sample: Codable { var a: Int64; var b: Double; var c: String?; var d: [String: Bool]; var e: Double }
        let value = try JSONValue(encoding: Sample(a: -3, b: 2.5, c: nil, d: ["x": true], e: 4))
        #expect(value == .object(["a": .int(-3), "b": .double(2.5), "d": .object(["x": .bool(true)]), "e": .int(4)]))
    }

    struct Generator {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func next(_ n: Int) -> Int {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(n))
        }
        mutating func space() -> String { ["", " ", "\n", "\t", "  "][next(5)] }
        mutating func string() -> String {
            let pieces = ["a", "Z", "0", " ", "é", "日", "🎵", "\\n", "\\\"", "\\\\", "\\/", "\\u0041", "\\u00e9", "\\ud83c\\udfb5", "\\t", "x-y"]
            return "\"" + (0..<next(6)).map { _ in pieces[next(pieces.count)] }.joined() + "\""
        }
        mutating func number() -> String {
            switch next(6) {
            case 0: return String(next(1000) - 500)
            case 1: return "\(next(100)).\(next(1000))"
            case 2: return "\(next(9) + 1)e\(next(20))"
            case 3: return "-\(next(100)).0"
            case 4: return String(Int64.max - Int64(next(3)))
            default: return "\(next(9) + 1).\(next(99))E-\(next(5))"
            }
        }
        mutating func document(depth: Int) -> String {
            let kind = depth > 4 ? next(5) : next(7)
            switch kind {
            case 0: return "null"
            case 1: return next(2) == 0 ? "true" : "false"
            case 2, 3: return number()
            case 4: return string()
            case 5:
                return "[" + space() + (0..<next(4)).map { _ in document(depth: depth + 1) }.joined(separator: "," + space()) + space() + "]"
            default:
                let members = (0..<next(4)).map { i in "\"k\(i)\"" + space() + ":" + space() + document(depth: depth + 1) }
                return "{" + space() + members.joined(separator: "," + space()) + space() + "}"
            }
        }
    }
}
