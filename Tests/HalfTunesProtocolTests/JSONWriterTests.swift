import Foundation
import Testing
@testable import HalfTunesProtocol

/// The writer's bytes are the bytes `WireCoding.encoder` (JSONEncoder, sorted keys, unescaped slashes) writes for
/// the same value, so replacing one by the other changes nothing on the wire.
@Suite("JSONWriter")
struct JSONWriterTests {
    static func encoded(_ value: JSONValue) -> [UInt8]? { try? Array(WireCoding.encoder.encode(value)) }

    @Test(arguments: [
        JSONValue.null, .bool(true), .int(0), .int(-42), .int(.max), .int(.min), .double(2.5), .double(2), .double(-0.0),
        .double(1e300), .double(1e-7), .double(0.1), .double(123456.789), .double(1e21), .double(1e16), .double(3.0e15),
        .string(""), .string("a/b \"q\" \\ é 日本 🎵"), .string("\u{0}\u{1}\u{8}\u{9}\u{a}\u{c}\u{d}\u{1f}\u{7f}"),
        .array([]), .object([:]), .object(["b": .int(1), "a": .array([.null]), "B": .bool(false), "a10": .int(1), "a9": .int(2),
                                           "é": .int(3), "_": .int(4), "Z": .int(5), "": .int(6), "aa": .int(7), "ab": .string("x")]),
    ])
    func valuesAreWrittenAsJSONEncoderWritesThem(_ value: JSONValue) throws {
        let written = try JSONWriter.write(value)
        #expect(written == Self.encoded(value),
                "\(String(decoding: written, as: UTF8.self)) vs \(String(decoding: Self.encoded(value) ?? [], as: UTF8.self))")
    }

    @Test func randomValuesAreWrittenAsJSONEncoderWritesThem() throws {
        var rng = JSONParserTests.Generator(seed: 0xBADC0DE)
        let keys = ["id", "ID", "Id", "a", "a1", "a10", "a2", "b", "B", "_x", "z", "é", "日", "key with space", "k/ey"]
        func value(_ depth: Int) -> JSONValue {
            switch depth > 3 ? rng.next(5) : rng.next(7) {
            case 0: return .null
            case 1: return .bool(rng.next(2) == 0)
            case 2: return .int(Int64(rng.next(2_000_001)) - 1_000_000)
            case 3: return .double(Double(rng.next(1_000_000)) / Double([1, 3, 7, 1000, 1 << 20][rng.next(5)]) * [1, -1, 1e10, 1e-5][rng.next(4)])
            case 4: return .string(["", "plain", "with \"quotes\"", "tab\tand\nnewline", "ünïcödé", "🎵/♫", "\u{1}"][rng.next(7)])
            case 5: return .array((0..<rng.next(4)).map { _ in value(depth + 1) })
            default:
                var members: [String: JSONValue] = [:]
                for _ in 0..<rng.next(5) { members[keys[rng.next(keys.count)]] = value(depth + 1) }
                return .object(members)
            }
        }
        for _ in 0..<500 {
            let v = value(0)
            #expect(try JSONWriter.write(v) == Self.encoded(v), "\(v)")
        }
    }

    @Test func nonFiniteNumbersAreRefused() {
        #expect(throws: JSONWriter.NotFinite.self) { try JSONWriter.write(.double(.infinity)) }
        #expect(throws: JSONWriter.NotFinite.self) { try JSONWriter.write(.array([.double(.nan)])) }
    }

    /// Responses and notifications as lines: the same bytes as WireCoding.line.
    @Test func responseAndNotificationLinesAreWhatWireCodingWrites() throws {
        let responses = [
            RPCResponse(id: .int(7), result: .object(["state": .string("queued"), "bytes": .int(5), "rate": .double(1.5)])),
            RPCResponse(id: .string("a/b"), result: .null),
            RPCResponse(id: nil, error: RPCError(.parseError, "bad \"line\"")),
            RPCResponse(id: .int(-1), error: RPCError(code: -32002, message: "x", data: .object(["task": .int(3)]))),
        ]
        for r in responses { #expect(try r.line() == WireCoding.line(r)) }
        let n = RPCNotification(method: "event", params: .object(["seq": .int(9), "payload": .object(["type": .string("didComplete")])]))
        #expect(try n.line() == WireCoding.line(n))
    }
}
