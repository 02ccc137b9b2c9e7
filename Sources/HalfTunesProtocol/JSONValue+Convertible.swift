/// A wire type the daemon sends often, converted to a `JSONValue` directly: exactly the value
/// `JSONValue(encoding:)` gives (its Codable conformance stays the definition, and tests hold the two equal),
/// without a trip through `JSONEncoder` and a parse of its output. Answers to `task.create`, `task.get`,
/// `task.list` pages and every event take this path.
public protocol JSONValueConvertible {
    var jsonValue: JSONValue { get }
}

public extension JSONValue {
    /// `value.jsonValue` when it has one, else `JSONValue(encoding:)`.
    static func of<T: Encodable>(_ value: T) throws -> JSONValue {
        if let convertible = value as? JSONValueConvertible { return convertible.jsonValue }
        return try JSONValue(encoding: value)
    }
}

extension Optional where Wrapped: JSONValueConvertible {
    /// `null` when absent (as `encode(_:forKey:)` writes a nil).
    var jsonValueOrNull: JSONValue { map(\.jsonValue) ?? .null }
}

private extension Optional where Wrapped == String {
    var jsonValueOrNull: JSONValue { map(JSONValue.string) ?? .null }
}

private extension Optional where Wrapped == Int64 {
    var jsonValueOrNull: JSONValue { map(JSONValue.int) ?? .null }
}

extension TaskError: JSONValueConvertible {
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = ["code": .string(code), "message": .string(message)]
        if let httpStatus { o["httpStatus"] = .int(Int64(httpStatus)) }
        return .object(o)
    }
}

extension TaskHold: JSONValueConvertible {
    public var jsonValue: JSONValue { .object(["reason": .string(reason), "message": .string(message)]) }
}

extension TaskResponse: JSONValueConvertible {
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = ["status": .int(Int64(status)), "bodyBytes": .int(bodyBytes), "truncated": .bool(truncated)]
        if let headers { o["headers"] = .array(headers.map { .array($0.map(JSONValue.string)) }) }
        if let body { o["body"] = .string(body) }
        return .object(o)
    }
}

extension TaskInfo: JSONValueConvertible {
    public var jsonValue: JSONValue {
        // Sized once for every member (a literal's table, grown afterwards, was rehashed for each task).
        var o = [String: JSONValue](minimumCapacity: 32)
        o["id"] = .int(id)
        o["session"] = .string(session)
        o["kind"] = .string(kind)
        o["url"] = .string(url)
        o["state"] = .string(state.rawValue)
        o["bytesReceived"] = .int(bytesReceived)
        o["bytesDurable"] = .int(bytesDurable)
        o["bytesExpected"] = bytesExpected.jsonValueOrNull
        o["destination"] = .string(destination)
        o["error"] = error.jsonValueOrNull
        o["createdAt"] = .string(createdAt)
        o["updatedAt"] = .string(updatedAt)
        o["description"] = description.jsonValueOrNull
        o["attempts"] = .int(Int64(attempts))
        o["priority"] = .string(priority.rawValue)
        if let currentURL { o["currentURL"] = .string(currentURL) }
        if let waitingReason { o["waitingReason"] = waitingReason.jsonValue }
        if let nextAttemptAt { o["nextAttemptAt"] = .string(nextAttemptAt) }
        if let queuePosition { o["queuePosition"] = .int(Int64(queuePosition)) }
        if let location { o["location"] = .string(location) }
        if let etag { o["etag"] = .string(etag) }
        if let lastModified { o["lastModified"] = .string(lastModified) }
        if let hold { o["hold"] = hold.jsonValue }
        if let checksum { o["checksum"] = .string(checksum) }
        if let bandwidthLimit { o["bandwidthLimit"] = .int(bandwidthLimit) }
        if let method { o["method"] = .string(method) }
        if let file { o["file"] = .string(file) }
        if let bytesSent { o["bytesSent"] = .int(bytesSent) }
        if let bytesExpectedToSend { o["bytesExpectedToSend"] = .int(bytesExpectedToSend) }
        if let response { o["response"] = response.jsonValue }
        if let overwrite { o["overwrite"] = .bool(overwrite) }
        if let phase { o["phase"] = .string(phase.rawValue) }
        if let maxConnections { o["maxConnections"] = .int(Int64(maxConnections)) }
        if let connections { o["connections"] = .int(Int64(connections)) }
        if let earliestBeginDate { o["earliestBeginDate"] = .string(earliestBeginDate) }
        if let suggestedFilename { o["suggestedFilename"] = .string(suggestedFilename) }
        return .object(o)
    }
}

extension TaskListResult: JSONValueConvertible {
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = ["tasks": .array(tasks.map(\.jsonValue))]
        if let nextCursor { o["nextCursor"] = .string(nextCursor) }
        return .object(o)
    }
}

extension TaskCancelResult: JSONValueConvertible {
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = ["task": task.jsonValue]
        if let resumeData { o["resumeData"] = .string(resumeData) }
        return .object(o)
    }
}

extension Event: JSONValueConvertible {
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = [
            "seq": seq.jsonValueOrNull, "session": .string(session), "task": task.jsonValueOrNull,
            "time": .string(time), "type": .string(type),
        ]
        switch payload {
        case let .stateChanged(state, previous, reason):
            o["state"] = .string(state.rawValue)
            o["previousState"] = previous.map { .string($0.rawValue) } ?? .null
            if let reason { o["reason"] = reason.jsonValue }
        case let .didWriteData(written, total, expected):
            o["bytesWritten"] = .int(written)
            o["totalBytesWritten"] = .int(total)
            o["totalBytesExpectedToWrite"] = .int(expected ?? -1)
        case let .didResumeAtOffset(offset, expected, discarded, reason):
            o["offset"] = .int(offset)
            o["expectedTotalBytes"] = .int(expected ?? -1)
            if let discarded { o["discardedBytes"] = .int(discarded) }
            if let reason { o["reason"] = .string(reason) }
        case let .didFinishDownloading(location):
            o["location"] = .string(location)
        case let .didChangeDestination(destination, suggested):
            o["destination"] = .string(destination)
            if let suggested { o["suggestedFilename"] = .string(suggested) }
        case let .didSendBodyData(sent, total, expected):
            o["bytesSent"] = .int(sent)
            o["totalBytesSent"] = .int(total)
            o["totalBytesExpectedToSend"] = .int(expected ?? -1)
        case let .didComplete(error, response):
            o["error"] = error.jsonValueOrNull
            if let response { o["response"] = response.jsonValue }
        case let .didFinishEvents(through):
            o["through"] = .int(through)
        case .didBecomeInvalid:
            break
        }
        return .object(o)
    }
}

// Parameters, encoded again by the daemon's unknown-field check (`StrictParams`) after every decode.

extension TaskCreateParams: JSONValueConvertible {
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = ["session": .string(session)]
        if let url { o["url"] = .string(url) }
        if let destination { o["destination"] = .string(destination) }
        if let headers { o["headers"] = .object(headers.mapValues(JSONValue.string)) }
        if let description { o["description"] = .string(description) }
        if let resumeData { o["resumeData"] = .string(resumeData) }
        if let start { o["start"] = .bool(start) }
        if let kind { o["kind"] = .string(kind.rawValue) }
        if let checksum { o["checksum"] = .string(checksum) }
        if let priority { o["priority"] = .string(priority.rawValue) }
        if let bandwidthLimit { o["bandwidthLimit"] = .int(bandwidthLimit) }
        if let method { o["method"] = .string(method) }
        if let file { o["file"] = .string(file) }
        if let maxResponseBytes { o["maxResponseBytes"] = .int(maxResponseBytes) }
        if let overwrite { o["overwrite"] = .bool(overwrite) }
        if let maxConnections { o["maxConnections"] = .int(Int64(maxConnections)) }
        if let earliestBeginDate { o["earliestBeginDate"] = .string(earliestBeginDate) }
        if let credentials {
            o["credentials"] = .object(["user": .string(credentials.user), "password": .string(credentials.password)])
        }
        return .object(o)
    }
}

extension TaskIDParams: JSONValueConvertible {
    public var jsonValue: JSONValue { .object(["id": .int(id)]) }
}

extension TaskCancelParams: JSONValueConvertible {
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = ["id": .int(id)]
        if let produceResumeData { o["produceResumeData"] = .bool(produceResumeData) }
        return .object(o)
    }
}

/// A parameter type read straight from a parsed `JSONValue` when the value has the usual shape; nil for
/// anything else (a wrong type, a number that is not an integer), which then goes through `JSONDecoder` for its
/// exact error. Tests hold the two to the same result.
public protocol JSONValueDecodable {
    init?(jsonValue: JSONValue)
}

/// Parameters read directly (`JSONValueDecodable`) that name every member they read, nested values whole: any
/// other member of the input that is not null is unknown, found without encoding the value again (as the daemon
/// otherwise compares the input with the decoded value encoded: the same members, JSONValueConvertibleTests).
public protocol JSONValueParams: JSONValueDecodable {
    static var members: Set<String> { get }
}

/// Reading optional members: absent and null are nil; any other mismatch makes the whole decode fail.
private struct Members {
    let object: [String: JSONValue]
    var failed = false

    mutating func string(_ key: String) -> String? {
        switch object[key] {
        case nil, .null?: return nil
        case .string(let s)?: return s
        default: failed = true; return nil
        }
    }

    mutating func int(_ key: String) -> Int64? {
        switch object[key] {
        case nil, .null?: return nil
        case .int(let i)?: return i
        default: failed = true; return nil
        }
    }

    mutating func bool(_ key: String) -> Bool? {
        switch object[key] {
        case nil, .null?: return nil
        case .bool(let b)?: return b
        default: failed = true; return nil
        }
    }

    mutating func raw<E: RawRepresentable>(_ key: String, _ type: E.Type) -> E? where E.RawValue == String {
        guard let text = string(key) else { return nil }
        guard let value = E(rawValue: text) else { failed = true; return nil }
        return value
    }

    mutating func stringMap(_ key: String) -> [String: String]? {
        switch object[key] {
        case nil, .null?: return nil
        case .object(let members)?:
            var map: [String: String] = [:]
            map.reserveCapacity(members.count)
            for (k, v) in members {
                guard case .string(let s) = v else { failed = true; return nil }
                map[k] = s
            }
            return map
        default: failed = true; return nil
        }
    }
}

extension TaskCreateParams: JSONValueParams {
    public init?(jsonValue: JSONValue) {
        guard case .object(let object) = jsonValue, case .string(let session)? = object["session"],
              object["credentials"] == nil // an object: read by JSONDecoder
        else { return nil }
        var m = Members(object: object)
        self.init(session: session, url: m.string("url"), destination: m.string("destination"),
                  headers: m.stringMap("headers"), description: m.string("description"),
                  resumeData: m.string("resumeData"), start: m.bool("start"), kind: m.raw("kind", TaskKind.self),
                  checksum: m.string("checksum"), priority: m.raw("priority", TaskPriority.self),
                  bandwidthLimit: m.int("bandwidthLimit"), method: m.string("method"), file: m.string("file"),
                  maxResponseBytes: m.int("maxResponseBytes"), overwrite: m.bool("overwrite"),
                  maxConnections: m.int("maxConnections").map { Int(clamping: $0) },
                  earliestBeginDate: m.string("earliestBeginDate"))
        if m.failed { return nil }
    }

    /// Not `credentials`: an object, read by JSONDecoder (and its members compared by the daemon).
    public static let members: Set<String> = [
        "session", "url", "destination", "headers", "description", "resumeData", "start", "kind", "checksum",
        "priority", "bandwidthLimit", "method", "file", "maxResponseBytes", "overwrite", "maxConnections",
        "earliestBeginDate"]
}

extension TaskIDParams: JSONValueParams {
    public init?(jsonValue: JSONValue) {
        guard case .object(let object) = jsonValue, case .int(let id)? = object["id"] else { return nil }
        self.init(id: id)
    }

    public static let members: Set<String> = ["id"]
}

extension TaskCancelParams: JSONValueParams {
    public init?(jsonValue: JSONValue) {
        guard case .object(let object) = jsonValue, case .int(let id)? = object["id"] else { return nil }
        var m = Members(object: object)
        self.init(id: id, produceResumeData: m.bool("produceResumeData"))
        if m.failed { return nil }
    }

    public static let members: Set<String> = ["id", "produceResumeData"]
}

extension TaskListParams: JSONValueParams {
    public init?(jsonValue: JSONValue) {
        guard case .object(let object) = jsonValue else { return nil }
        var m = Members(object: object)
        let limit = m.int("limit")
        self.init(session: m.string("session"), state: m.raw("state", TaskState.self),
                  limit: limit.flatMap { Int(exactly: $0) }, cursor: m.string("cursor"))
        if m.failed || (limit != nil && self.limit == nil) { return nil }
    }

    public static let members: Set<String> = ["session", "state", "limit", "cursor"]
}

extension EventsAckParams: JSONValueParams {
    public init?(jsonValue: JSONValue) {
        guard case .object(let object) = jsonValue, case .string(let session)? = object["session"],
              case .int(let through)? = object["through"] else { return nil }
        self.init(session: session, through: through)
    }

    public static let members: Set<String> = ["session", "through"]
}

extension TaskError: JSONValueDecodable {
    /// Read directly (the journal holds one per finished task, read back for every page of `task.list`).
    public init?(jsonValue: JSONValue) {
        guard case .object(let object) = jsonValue, case .string(let code)? = object["code"],
              case .string(let message)? = object["message"], object.count <= 3 else { return nil }
        var m = Members(object: object)
        let status = m.int("httpStatus")
        if m.failed || (object.count == 3 && object["httpStatus"] == nil) { return nil }
        guard let status else {
            self.init(code: code, message: message)
            return
        }
        guard let httpStatus = Int(exactly: status) else { return nil }
        self.init(code: code, message: message, httpStatus: httpStatus)
    }
}
