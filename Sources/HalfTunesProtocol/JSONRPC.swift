#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A JSON-RPC request id: a number or a string (`null` ids are treated as absent).
public enum RPCID: Codable, Sendable, Hashable, CustomStringConvertible {
    case int(Int64)
    case string(String)

    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let i = try? c.decode(Int64.self) { self = .int(i); return }
        if let s = try? c.decode(String.self) { self = .string(s); return }
        throw DecodingError.dataCorruptedError(in: c, debugDescription: "id must be a string or an integer")
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .int(let i): try c.encode(i)
        case .string(let s): try c.encode(s)
        }
    }

    public var description: String {
        switch self {
        case .int(let i): return String(i)
        case .string(let s): return s
        }
    }
}

/// A request as sent by clients. `id` absent means a notification (no response is sent).
public struct RPCRequest: Codable, Sendable {
    public var jsonrpc: String
    public var id: RPCID?
    public var method: String
    public var params: JSONValue?

    public init(id: RPCID?, method: String, params: JSONValue? = nil) {
        self.jsonrpc = "2.0"
        self.id = id
        self.method = method
        self.params = params
    }
}

/// The error member of a response.
public struct RPCError: Codable, Sendable, Error, Equatable, CustomStringConvertible {
    public var code: Int
    public var message: String
    public var data: JSONValue?

    public init(code: Int, message: String, data: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    public init(_ code: RPCErrorCode, _ message: String, data: JSONValue? = nil) {
        self.init(code: code.rawValue, message: message, data: data)
    }

    public var knownCode: RPCErrorCode? { RPCErrorCode(rawValue: code) }
    public var description: String { message }
}

/// A response. Exactly one of `result` and `error` is present; `id` is `null` when the request's id
/// could not be read.
public struct RPCResponse: Codable, Sendable {
    public var jsonrpc: String = "2.0"
    public var id: RPCID?
    public var result: JSONValue?
    public var error: RPCError?
    /// A result written straight to JSON text when the line is made (`line(unqualifying:)`), instead of `result`.
    public var resultText: (any JSONTextWritable)?

    public init(id: RPCID?, result: JSONValue) {
        self.id = id
        self.result = result
        self.error = nil
    }

    public init(id: RPCID?, resultText: any JSONTextWritable) {
        self.id = id
        self.result = nil
        self.error = nil
        self.resultText = resultText
    }

    public init(id: RPCID?, error: RPCError) {
        self.id = id
        self.result = nil
        self.error = error
    }

    enum CodingKeys: String, CodingKey { case jsonrpc, id, result, error }

    /// A response from its parsed line (`RPCIncoming.decode`); throws where Codable decoding would.
    init(parsed value: JSONValue) throws {
        guard case .object(let members) = value else { throw RPCError(.parseError, "not an object") }
        switch members["id"] {
        case nil, .null?: id = nil
        case .int(let i)?: id = .int(i)
        case .string(let s)?: id = .string(s)
        default: throw RPCError(.invalidRequest, "id is neither a string nor an integer")
        }
        switch members["error"] {
        case nil, .null?: error = nil
        case let e?: error = try e.decode(RPCError.self)
        }
        result = members["result"]
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        jsonrpc = try c.decode(String.self, forKey: .jsonrpc)
        id = try c.decodeIfPresent(RPCID.self, forKey: .id)
        error = try c.decodeIfPresent(RPCError.self, forKey: .error)
        if c.contains(.result) {
            result = try c.decode(JSONValue.self, forKey: .result)
        } else {
            result = nil
        }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(jsonrpc, forKey: .jsonrpc)
        if let id { try c.encode(id, forKey: .id) } else { try c.encodeNil(forKey: .id) }
        if let error {
            try c.encode(error, forKey: .error)
        } else if let result {
            try c.encode(result, forKey: .result)
        } else if let resultText {
            var text: [UInt8] = []
            resultText.writeJSON(into: &text, unqualifying: nil)
            try c.encode(try JSONParser.parse(text), forKey: .result)
        } else {
            try c.encode(JSONValue.null, forKey: .result)
        }
    }
}

/// A server-to-client notification (events are sent this way).
public struct RPCNotification: Codable, Sendable {
    public var jsonrpc: String = "2.0"
    public var method: String
    public var params: JSONValue

    public init(method: String, params: JSONValue) {
        self.method = method
        self.params = params
    }
}

/// Any line a client can receive: a response (has `id`) or a notification (has `method`).
public enum RPCIncoming: Sendable {
    case response(RPCResponse)
    case notification(RPCNotification)

    public static func decode(_ line: some Collection<UInt8>) throws -> RPCIncoming {
        let probe = try JSONParser.parse(line)
        // The usual shapes straight from the parsed value; anything else through Codable, for its errors.
        if case .string("2.0")? = probe["jsonrpc"] {
            if case .string(let method)? = probe["method"], let params = probe["params"] {
                return .notification(RPCNotification(method: method, params: params))
            }
            if probe["method"] == nil, let response = try? RPCResponse(parsed: probe) { return .response(response) }
        }
        let data = Data(line)
        if probe["method"] != nil {
            return .notification(try WireCoding.decoder.decode(RPCNotification.self, from: data))
        }
        return .response(try WireCoding.decoder.decode(RPCResponse.self, from: data))
    }
}

public extension RPCResponse {
    /// This response as one line (`\n`-terminated), written by `JSONWriter`: the bytes `WireCoding.line` writes.
    /// The response as one line of JSON text. A `resultText` shows session names under `unqualifying` (the
    /// viewer's "uid/" prefix) without it; a `result` is written as it is.
    func line(unqualifying prefix: String? = nil) throws -> [UInt8] {
        if error == nil, result == nil, let resultText {
            // `{"id":…,"jsonrpc":"2.0","result":…}`: the members in sorted order, as JSONWriter writes them.
            var bytes: [UInt8] = []
            bytes.append(contentsOf: #"{"id":"#.utf8)
            switch id {
            case nil: JSONText.null(&bytes)
            case .int(let i)?: JSONText.int(i, &bytes)
            case .string(let s)?: JSONWriter.writeString(s, into: &bytes)
            }
            JSONText.key("jsonrpc", &bytes)
            JSONWriter.writeString(jsonrpc, into: &bytes)
            JSONText.key("result", &bytes)
            resultText.writeJSON(into: &bytes, unqualifying: prefix)
            bytes.append(UInt8(ascii: "}"))
            bytes.append(UInt8(ascii: "\n"))
            return bytes
        }
        var members: [String: JSONValue] = ["jsonrpc": .string(jsonrpc)]
        switch id {
        case nil: members["id"] = .null
        case .int(let i)?: members["id"] = .int(i)
        case .string(let s)?: members["id"] = .string(s)
        }
        if let error {
            var e: [String: JSONValue] = ["code": .int(Int64(error.code)), "message": .string(error.message)]
            if let data = error.data { e["data"] = data }
            members["error"] = .object(e)
        } else {
            members["result"] = result ?? .null
        }
        var bytes = try JSONWriter.write(.object(members))
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }
}

public extension RPCNotification {
    /// This notification as one line (`\n`-terminated), written by `JSONWriter`: the bytes `WireCoding.line` writes.
    func line() throws -> [UInt8] {
        var bytes = try JSONWriter.write(.object(["jsonrpc": .string(jsonrpc), "method": .string(method), "params": params]))
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }
}
