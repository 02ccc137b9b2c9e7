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
    /// Converted to JSON by the connection, off the core.
    case result(any Encodable & Sendable)
    /// The handler already wrote its response (events.subscribe, which must precede the replay).
    case alreadySent
}

/// Every method of the control protocol, routed from one table.
///
/// A request is handled in three steps, so one connection's requests overlap: `prepare` parses it, checks
/// the envelope and decodes the parameters (no core); `run` makes the call on the core (isolated to it, so a
/// pipelining client's requests cost no hop each); `response` turns the reply into JSON (off the core).
/// Answers keep request order.
struct RPCRouter: Sendable {
    /// Decodes a method's parameters (throwing `RPCError.invalidParams`) into the call to make.
    typealias Handler = @Sendable (RPCContext, JSONValue) throws -> Prepared
    typealias Call = @Sendable (isolated DaemonCore) async throws -> RPCReply

    /// A request line after `prepare`: its answer is known already (a malformed request, unknown method,
    /// bad parameters; nil for a notification), or the call to make.
    enum Prepared: Sendable {
        case answer(RPCResponse?)
        case call(id: RPCID?, Call)
        /// task.create: consecutive ones are made together (`DaemonCore.createTasks`, one journal transaction).
        case create(id: RPCID?, TaskCreateParams, Caller)
    }

    /// A request after `run`: the reply, or the error, still to be turned into a response.
    enum Answer: Sendable {
        case response(RPCResponse?)
        case reply(id: RPCID?, RPCReply)
        case failure(id: RPCID?, any Error)
    }

    private var routes: [String: Handler] = [:]

    init() {
        route(.daemonStatus) { (_: Empty, _, core) in core.status() }
        route(.sessionOpen) { (p: SessionOpenParams, ctx, core) in try await core.openSession(p, uid: ctx.uid) }
        route(.sessionList) { (_: Empty, ctx, core) in core.listSessions(caller: ctx.caller) }
        route(.sessionInvalidate) { (p: SessionInvalidateParams, ctx, core) in try await core.invalidateSession(p, caller: ctx.caller) }
        routes[RPCMethod.taskCreate.rawValue] = { ctx, params in
            .create(id: ctx.requestID, try Self.decodeParams(params), ctx.caller)
        }
        route(.taskResume) { (p: TaskIDParams, ctx, core) in try await core.resumeTask(p.id, caller: ctx.caller) }
        route(.taskSuspend) { (p: TaskIDParams, ctx, core) in try await core.suspendTask(p.id, caller: ctx.caller) }
        route(.taskCancel) { (p: TaskCancelParams, ctx, core) in
            try await core.cancelTask(p.id, produceResumeData: p.produceResumeData == true, caller: ctx.caller)
        }
        route(.taskGet) { (p: TaskIDParams, ctx, core) in try await core.getTask(p.id, caller: ctx.caller) }
        route(.taskList) { (p: TaskListParams, ctx, core) in try await core.listTasks(p, caller: ctx.caller) }
        route(.taskUpdate) { (p: TaskUpdateParams, ctx, core) in try await core.updateTask(p, caller: ctx.caller) }
        route(.taskMove) { (p: TaskMoveParams, ctx, core) in try await core.moveTask(p, caller: ctx.caller) }
        route(.daemonSetLimits) { (p: DaemonSetLimitsParams, ctx, core) in try await core.setLimits(p, uid: ctx.uid) }
        route(.eventsAck) { (p: EventsAckParams, ctx, core) in try await core.ack(p, caller: ctx.caller) }
        routes[RPCMethod.eventsSubscribe.rawValue] = { ctx, params in
            let p: EventsSubscribeParams = try Self.decodeParams(params)
            return .call(id: ctx.requestID) { core in
                try await core.subscribe(p, caller: ctx.caller, requestID: ctx.requestID, outbox: ctx.outbox)
                return .alreadySent
            }
        }
        routeAgents()
    }

    /// No parameters (absent, or an object whose members are all unknown).
    struct Empty: Codable, JSONValueParams {
        init() {}
        init?(jsonValue: JSONValue) {
            guard case .object = jsonValue else { return nil }
        }
        static let members: Set<String> = []
    }

    /// An agent's words, journaled with the session's launch record: at most 1,000 characters.
    static func capped(_ text: String) -> String { text.count > 1000 ? String(text.prefix(1000)) + "…" : text }

    /// The users' agents (`halftunesctl agent`): they start their user's launch units in its own manager.
    private mutating func routeAgents() {
        routes[RPCMethod.agentRegister.rawValue] = { ctx, params in
            let _: Empty = try Self.decodeParams(params)
            return .call(id: ctx.requestID) { core in
                core.registerAgent(caller: ctx.caller, requestID: ctx.requestID, outbox: ctx.outbox)
                return .alreadySent
            }
        }
        // A report names the unit it is about: one for a unit the session no longer has changes nothing.
        route(.agentStarted) { (p: AgentStartedParams, ctx, core) in
            try core.agentReport(session: p.session, caller: ctx.caller, connectionID: ctx.connectionID,
                                 .launchStartAnswered(p.session, unit: p.unit, error: p.error.map(Self.capped)))
        }
        route(.agentEnded) { (p: AgentEndedParams, ctx, core) in
            try core.agentReport(session: p.session, caller: ctx.caller, connectionID: ctx.connectionID,
                                 .launchUnitEnded(p.session, unit: p.unit, result: Self.capped(p.result),
                                                  exitStatus: p.exitStatus))
        }
    }

    private mutating func route<P: Codable & Sendable, R: Encodable & Sendable>(
        _ method: RPCMethod, _ body: @escaping @Sendable (P, RPCContext, isolated DaemonCore) async throws -> R
    ) {
        routes[method.rawValue] = { ctx, params in
            let p: P = try Self.decodeParams(params)
            return .call(id: ctx.requestID) { core in .result(try await body(p, ctx, core)) }
        }
    }

    static func decodeParams<P: Codable>(_ params: JSONValue) throws(RPCError) -> P {
        do {
            let p: P
            let unknown: [String]
            if let fast = P.self as? JSONValueParams.Type, case .object(let given) = params,
               let decoded = fast.init(jsonValue: params) as? P {
                // The usual shape, read directly; anything else through JSONDecoder for its exact error.
                p = decoded
                unknown = StrictParams.unknownMembers(input: given, known: fast.members)
            } else {
                p = try params.decode(P.self)
                unknown = StrictParams.unknownFields(input: params, decoded: try JSONValue.of(p))
            }
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

    /// Makes the call a prepared request names, on the core.
    func run(_ prepared: Prepared, on core: isolated DaemonCore) async -> Answer {
        switch prepared {
        case .answer(let response):
            return .response(response)
        case .call(let id, let call):
            do {
                return .reply(id: id, try await call(core))
            } catch {
                return .failure(id: id, error)
            }
        case .create(let id, let p, let caller):
            return Self.answer(id: id, await core.createTasks([(p, caller)])[0])
        }
    }

    /// The answer of one task.create.
    static func answer(id: RPCID?, _ created: Result<TaskInfo, RPCError>) -> Answer {
        switch created {
        case .success(let info): return .reply(id: id, .result(info))
        case .failure(let error): return .failure(id: id, error)
        }
    }

    /// The response line an answer makes, if any (none for a notification or an answer already sent).
    func response(_ answer: Answer) -> RPCResponse? {
        switch answer {
        case .response(let response):
            return response
        case .failure(let id, let error):
            return Self.answer(id: id, error)
        case .reply(_, .alreadySent):
            return nil
        case .reply(let id, .result(let result)):
            guard id != nil else { return nil }
            // Task answers and task.list pages are written straight to text (in the outbox, for its viewer).
            if let text = result as? any JSONTextWritable { return RPCResponse(id: id, resultText: text) }
            do {
                return RPCResponse(id: id, result: try JSONValue.of(result))
            } catch {
                return Self.answer(id: id, error)
            }
        }
    }

    /// Parses a request line and decodes its parameters, without touching the core.
    func prepare(line: [UInt8], connectionID: UInt64, uid: UInt32, groups: [gid_t] = [], outbox: Outbox) -> Prepared {
        let value: JSONValue
        do {
            value = try JSONParser.parse(line)
        } catch {
            return .answer(RPCResponse(id: nil, error: .parse("the line is not valid JSON (or nests arrays and objects too deeply)")))
        }
        guard case .object(let object) = value else {
            if case .array = value {
                return .answer(RPCResponse(id: nil, error: .invalidRequest("batches are not supported; send one object per line")))
            }
            return .answer(RPCResponse(id: nil, error: .invalidRequest("a request must be a JSON object")))
        }
        var id: RPCID?
        switch object["id"] {
        case nil, .null?: id = nil
        case .int(let i)?: id = .int(i)
        case .string(let s)?: id = .string(s)
        default: return .answer(RPCResponse(id: nil, error: .invalidRequest("id must be a string or an integer")))
        }
        guard object["jsonrpc"] == .string("2.0") else {
            return .answer(RPCResponse(id: id, error: .invalidRequest("\"jsonrpc\" must be \"2.0\"")))
        }
        guard case .string(let method)? = object["method"] else {
            return .answer(RPCResponse(id: id, error: .invalidRequest("\"method\" must be a string")))
        }
        let unknown = object.keys.filter { !Self.requestMembers.contains($0) }.sorted()
        if !unknown.isEmpty {
            let list = unknown.map { "'\($0.prefix(64))'" }.joined(separator: ", ")
            return .answer(RPCResponse(id: id, error: .invalidRequest(
                "unknown member\(unknown.count == 1 ? "" : "s") \(list); a request has only jsonrpc, id, method and params")))
        }
        let params = object["params"] ?? .object([:])
        guard params.isObject else {
            return .answer(RPCResponse(id: id, error: .invalidParams("params must be an object")))
        }
        guard let handler = routes[method] else {
            return .answer(id == nil ? nil : RPCResponse(id: id, error: .methodNotFound(method)))
        }
        let ctx = RPCContext(connectionID: connectionID, caller: Caller(uid: uid, groups: groups), outbox: outbox, requestID: id)
        do {
            let qualified = try SessionNames.qualify(params: params, method: method, uid: uid)
            return try handler(ctx, qualified)
        } catch {
            return .answer(Self.answer(id: id, error))
        }
    }

    /// The error answer to a request (none for a notification).
    private static func answer(id: RPCID?, _ error: Error) -> RPCResponse? {
        guard id != nil else { return nil }
        if let error = error as? RPCError { return RPCResponse(id: id, error: error) }
        return RPCResponse(id: id, error: RPCError(.internalError, "Internal error: \(error)"))
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
            if let form = forms[ctx.codingPath.map(\.stringValue).joined(separator: ".")] {
                return "\(path(ctx)) must be \(form)"
            }
            return "\(path(ctx)) must be \(readable(type))"
        case .valueNotFound(let type, let ctx):
            return "\(path(ctx)) must be \(readable(type)), not null"
        case .dataCorrupted(let ctx):
            return "\(path(ctx)): \(ctx.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }

    /// Fields whose form changed, by path: a client still sending the old one is told the new.
    static let forms = [
        "configuration.credentials": #"a list of credentials, each for the origin it is sent to: "#
            + #"[{"origin":"https://files.example","user":"alice","password":"…"}] (with "realm" to answer one realm "#
            + #"only); credentials without an origin are no longer accepted"#,
    ]

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
