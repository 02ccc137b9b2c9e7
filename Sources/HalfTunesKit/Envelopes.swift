#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A request as written by the client, with typed params (omitted when nil).
struct OutgoingRequest<Params: Encodable>: Encodable {
    let id: Int64
    let method: String
    let params: Params?

    enum CodingKeys: String, CodingKey { case jsonrpc, id, method, params }

    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode("2.0", forKey: .jsonrpc)
        try c.encode(id, forKey: .id)
        try c.encode(method, forKey: .method)
        try c.encodeIfPresent(params, forKey: .params)
    }
}

/// Any incoming line, decoded in one pass: a notification (`method` set) or a response whose
/// `result` is decoded as `Result`. A result that does not decode is kept as `resultError`.
struct IncomingEnvelope<Result: Decodable>: Decodable {
    var id: RPCID?
    var method: String?
    var error: RPCError?
    var hasResult = false
    var result: Result?
    var resultError: (any Error)?

    enum CodingKeys: String, CodingKey { case id, method, result, error }

    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try? c.decodeIfPresent(RPCID.self, forKey: .id)
        method = try c.decodeIfPresent(String.self, forKey: .method)
        if method != nil { return }
        error = try c.decodeIfPresent(RPCError.self, forKey: .error)
        if error == nil, c.contains(.result) {
            hasResult = true
            do { result = try c.decode(Result.self, forKey: .result) } catch { resultError = error }
        }
    }
}

/// An incoming line seen by an event reader: `event` is set for well-formed `event` notifications;
/// `eventError` when the params do not decode as an `Event`.
struct EventEnvelope: Decodable {
    var method: String?
    var event: Event?
    var eventError: (any Error)?

    enum CodingKeys: String, CodingKey { case method, params }

    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        method = try c.decodeIfPresent(String.self, forKey: .method)
        guard method == HalfTunes.eventNotification else { return }
        do { event = try c.decode(Event.self, forKey: .params) } catch { eventError = error }
    }
}

/// A short, printable excerpt of a line for error messages.
func excerpt(_ line: [UInt8], limit: Int = 200) -> String {
    let text = String(decoding: line.prefix(limit), as: UTF8.self)
    return line.count > limit ? text + "…" : text
}
