import Foundation
import HalfTunesProtocol

/// Who is calling and where replies go.
struct RPCContext: Sendable {
    let connectionID: UInt64
    let caller: Caller
    var uid: UInt32 { caller.uid }
    let outbox: Outbox
    let requestID: RPCID?
}

enum RPCReply: Sendable {
    case result(JSONValue)
    /// The handler already wrote its response (events.subscribe, which must precede the replay).
    case alreadySent
}

/// Every method of the control protocol, routed from one table.
struct RPCRouter: Sendable {
    typealias Handler = @Sendable (RPCContext, JSONValue) async throws -> RPCReply

    private var routes: [String: Handler] = [:]

    init(core: DaemonCore) {
        route(.daemonStatus) { (_: Empty, _) in await core.status() }
        route(.sessionOpen) { (p: SessionOpenParams, ctx) in try await core.openSession(p, uid: ctx.uid) }
        route(.sessionList) { (_: Empty, ctx) in await core.listSessions(caller: ctx.caller) }
        route(.sessionInvalidate) { (p: SessionInvalidateParams, ctx) in try await core.invalidateSession(p, caller: ctx.caller) }
        route(.taskCreate) { (p: TaskCreateParams, ctx) in try await core.createTask(p, caller: ctx.caller) }
        route(.taskResume) { (p: TaskIDParams, ctx) in try await core.resumeTask(p.id, caller: ctx.caller) }
        route(.taskSuspend) { (p: TaskIDParams, ctx) in try await core.suspendTask(p.id, caller: ctx.caller) }
        route(.taskCancel) { (p: TaskCancelParams, ctx) in
            try await core.cancelTask(p.id, produceResumeData: p.produceResumeData == true, caller: ctx.caller)
        }
        route(.taskGet) { (p: TaskIDParams, ctx) in try await core.getTask(p.id, caller: ctx.caller) }
        route(.taskList) { (p: TaskListParams, ctx) in try await core.listTasks(p, caller: ctx.caller) }
        route(.taskUpdate) { (p: TaskUpdateParams, ctx) in try await core.updateTask(p, caller: ctx.caller) }
        route(.taskMove) { (p: TaskMoveParams, ctx) in try await core.moveTask(p, caller: ctx.caller) }
        route(.daemonSetLimits) { (p: DaemonSetLimitsParams, ctx) in try await core.setLimits(p, uid: ctx.uid) }
        route(.eventsAck) { (p: EventsAckParams, ctx) in try await core.ack(p, caller: ctx.caller) }
        routes[RPCMethod.eventsSubscribe.rawValue] = { ctx, params in
            let p: EventsSubscribeParams = try Self.decodeParams(params)
            try await core.subscribe(p, caller: ctx.caller, requestID: ctx.requestID, outbox: ctx.outbox)
            return .alreadySent
        }
    }

    struct Empty: Codable {}

    private mutating func route<P: Codable & Sendable, R: Encodable & Sendable>(
        _ method: RPCMethod, _ body: @escaping @Sendable (P, RPCContext) async throws -> R
    ) {
        routes[method.rawValue] = { ctx, params in
            let p: P = try Self.decodeParams(params)
            let result = try await body(p, ctx)
            return .result(try JSONValue.of(result))
        }
    }

    static func decodeParams<P: Codable>(_ params: JSONValue) throws(RPCError) -> P {
        do {
            let p: P
            if let fast = P.self as? JSONValueDecodable.Type, let decoded = fast.init(jsonValue: params) as? P {
                p = decoded // the usual shape, read directly; anything else through JSONDecoder for its exact error
            } else {
                p = try params.decode(P.self)
            }
            let unknown = StrictParams.unknownFields(input: params, decoded: try JSONValue.of(p))
            if !unknown.isEmpty {
                let list = unknown.map { "'\($0)'" }.joined(separator: ", ")
                throw RPCError.invalidParams("unknown field\(unknown.count == 1 ? "" : "s") \(list); see docs/protocol.md for this method's fields")
            }
            return p
        } catch let error as RPCError {
            throw error
        } catch let error as DecodingError {
            throw RPCError.invalidParams(describe(error))
        } catch {
            throw RPCError.invalidParams("\(error)")
        }
    }

    /// Handles one request line; returns the response line to send, if any.
    func handle(line: [UInt8], connectionID: UInt64, uid: UInt32, groups: [gid_t] = [], outbox: Outbox) async -> RPCResponse? {
        let value: JSONValue
        do {
            value = try JSONParser.parse(line)
        } catch {
            return RPCResponse(id: nil, error: .parse("the line is not valid JSON (or nests arrays and objects too deeply)"))
        }
        guard case .object(let object) = value else {
            if case .array = value {
                return RPCResponse(id: nil, error: .invalidRequest("batches are not supported; send one object per line"))
            }
            return RPCResponse(id: nil, error: .invalidRequest("a request must be a JSON object"))
        }
        var id: RPCID?
        switch object["id"] {
        case nil, .null?: id = nil
        case .int(let i)?: id = .int(i)
        case .string(let s)?: id = .string(s)
        default: return RPCResponse(id: nil, error: .invalidRequest("id must be a string or an integer"))
        }
        guard object["jsonrpc"] == .string("2.0") else {
            return RPCResponse(id: id, error: .invalidRequest("\"jsonrpc\" must be \"2.0\""))
        }
        guard case .string(let method)? = object["method"] else {
            return RPCResponse(id: id, error: .invalidRequest("\"method\" must be a string"))
        }
        let unknown = object.keys.filter { !Self.requestMembers.contains($0) }.sorted()
        if !unknown.isEmpty {
            let list = unknown.map { "'\($0.prefix(64))'" }.joined(separator: ", ")
            return RPCResponse(id: id, error: .invalidRequest(
                "unknown member\(unknown.count == 1 ? "" : "s") \(list); a request has only jsonrpc, id, method and params"))
        }
        let params = object["params"] ?? .object([:])
        guard params.isObject else {
            return RPCResponse(id: id, error: .invalidParams("params must be an object"))
        }
        guard let handler = routes[method] else {
            return id == nil ? nil : RPCResponse(id: id, error: .methodNotFound(method))
        }
        let ctx = RPCContext(connectionID: connectionID, caller: Caller(uid: uid, groups: groups), outbox: outbox, requestID: id)
        do {
            let qualified = try SessionNames.qualify(params: params, method: method, uid: uid)
            let reply = try await handler(ctx, qualified)
            switch reply {
            case .result(let result): return id == nil ? nil : RPCResponse(id: id, result: result)
            case .alreadySent: return nil
            }
        } catch let error as RPCError {
            return id == nil ? nil : RPCResponse(id: id, error: error)
        } catch {
            return id == nil ? nil : RPCResponse(id: id, error: RPCError(.internalError, "Internal error: \(error)"))
        }
    }

    static let requestMembers: Set<String> = ["jsonrpc", "id", "method", "params"]

    static func describe(_ error: DecodingError) -> String {
        func path(_ ctx: DecodingError.Context) -> String {
            let p = ctx.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
            return p.isEmpty ? "params" : "'\(p)'"
        }
        switch error {
        case .keyNotFound(let key, let ctx):
            let prefix = ctx.codingPath.map(\.stringValue).joined(separator: ".")
            return "missing field '\(prefix.isEmpty ? "" : prefix + ".")\(key.stringValue)'"
        case .typeMismatch(let type, let ctx):
            return "\(path(ctx)) must be \(readable(type))"
        case .valueNotFound(let type, let ctx):
            return "\(path(ctx)) must be \(readable(type)), not null"
        case .dataCorrupted(let ctx):
            return "\(path(ctx)): \(ctx.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }

    private static func readable(_ type: Any.Type) -> String {
        switch type {
        case is Int64.Type, is Int.Type: return "an integer"
        case is Double.Type: return "a number"
        case is String.Type: return "a string"
        case is Bool.Type: return "true or false"
        default: return "\(type)"
        }
    }
}
