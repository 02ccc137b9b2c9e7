#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Any JSON value. Integers are kept exact (`int`); other numbers are `double`.
public enum JSONValue: Codable, Sendable, Equatable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null; return }
        if let b = try? c.decode(Bool.self) { self = .bool(b); return }
        if let i = try? c.decode(Int64.self) { self = .int(i); return }
        if let d = try? c.decode(Double.self) { self = .double(d); return }
        if let s = try? c.decode(String.self) { self = .string(s); return }
        if let a = try? c.decode([JSONValue].self) { self = .array(a); return }
        if let o = try? c.decode([String: JSONValue].self) { self = .object(o); return }
        throw DecodingError.dataCorruptedError(in: c, debugDescription: "not a JSON value")
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .int(let i): try c.encode(i)
        case .double(let d): try c.encode(d)
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    public var isObject: Bool { if case .object = self { return true } else { return false } }
}

public extension JSONValue {
    /// Encodes any Encodable into a JSONValue.
    init<T: Encodable>(encoding value: T) throws {
        self = try JSONParser.parse(WireCoding.encoder.encode(value))
    }

    /// Decodes this value as `T`.
    func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        try WireCoding.decoder.decode(T.self, from: Data(JSONWriter.write(self)))
    }
}

/// Shared encoder/decoder settings for the wire (sorted keys make lines stable and diffable).
public enum WireCoding {
    public static var encoder: JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }
    public static var decoder: JSONDecoder { JSONDecoder() }

    /// One JSON object as one line, terminated by `\n`.
    public static func line<T: Encodable>(_ value: T) throws -> [UInt8] {
        var bytes = Array(try encoder.encode(value))
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }
}
