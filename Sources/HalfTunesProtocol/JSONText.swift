// Wire values written straight to JSON text, with no JSONValue in between: task.list pages and task answers.

/// A value the daemon sends often, written as JSON text directly: exactly the bytes
/// `JSONWriter.write(jsonValue)` gives (compact, sorted keys, the same escapes; JSONTextTests hold the two
/// equal for every field present or absent), without building a `JSONValue` tree, sorting its members, and
/// freeing it again (that was more than half of a `task.list` page's cost).
public protocol JSONTextWritable: Sendable {
    /// Appends the value's JSON text to `out`. A session name that starts with `unqualifying` (the viewer's
    /// "uid/" prefix) is written without it, as the daemon shows a client its own sessions.
    func writeJSON(into out: inout [UInt8], unqualifying prefix: String?)
}

/// The pieces the writers are made of.
enum JSONText {
    /// `"name":`, after a comma unless it is the object's first member.
    @inline(__always)
    static func key(_ name: StaticString, _ out: inout [UInt8], first: Bool = false) {
        if !first { out.append(UInt8(ascii: ",")) }
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        out.append(UInt8(ascii: "\""))
        out.append(UInt8(ascii: ":"))
    }

    static func int(_ value: Int64, _ out: inout [UInt8]) {
        guard value != .min else {
            out.append(contentsOf: String(value).utf8)
            return
        }
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var v = value.magnitude
        // At most 19 digits, written backwards into a small buffer.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var i = 20
            repeat {
                i -= 1
                digits[i] = UInt8(ascii: "0") + UInt8(v % 10)
                v /= 10
            } while v > 0
            out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[i..<20]))
        }
    }

    static func null(_ out: inout [UInt8]) {
        out.append(contentsOf: "null".utf8)
    }

    /// A nested value without doubles (an error, a hold, a response), through its `JSONValue`: these are rare.
    static func value(_ value: JSONValue, _ out: inout [UInt8]) {
        do {
            try JSONWriter.write(value, into: &out)
        } catch {
            null(&out) // only a non-finite double throws, and these values hold none
        }
    }

    // Members: with a non-optional value, always written; with an optional one, `null` when `nullable`, else
    // left out when nil (as the Codable conformances write them).

    static func member(_ name: StaticString, _ value: String?, _ out: inout [UInt8], nullable: Bool = false) {
        guard let value else { return nullable ? member(name, null: &out) : () }
        key(name, &out)
        JSONWriter.writeString(value, into: &out)
    }

    static func member(_ name: StaticString, _ value: Int64?, _ out: inout [UInt8], nullable: Bool = false) {
        guard let value else { return nullable ? member(name, null: &out) : () }
        key(name, &out)
        int(value, &out)
    }

    static func member(_ name: StaticString, _ value: (some JSONValueConvertible)?, _ out: inout [UInt8],
                       nullable: Bool = false) {
        guard let value else { return nullable ? member(name, null: &out) : () }
        key(name, &out)
        JSONText.value(value.jsonValue, &out)
    }

    private static func member(_ name: StaticString, null out: inout [UInt8]) {
        key(name, &out)
        null(&out)
    }

    /// A session name as `viewer`'s "uid/" prefix shows it.
    static func session(_ name: String, unqualifying prefix: String?, _ out: inout [UInt8]) {
        key("session", &out)
        if let prefix, name.hasPrefix(prefix) {
            JSONWriter.writeString(String(name.dropFirst(prefix.count)), into: &out)
        } else {
            JSONWriter.writeString(name, into: &out)
        }
    }
}

extension TaskInfo: JSONTextWritable {
    /// The members in `JSONWriter`'s order (UTF-8 byte order of the keys); the optional ones only when present,
    /// the nullable ones (`bytesExpected`, `description`, `error`) always, as the Codable conformance writes them.
    public func writeJSON(into out: inout [UInt8], unqualifying prefix: String?) {
        writeHead(into: &out)
        JSONText.session(session, unqualifying: prefix, &out)
        writeTail(into: &out)
    }

    /// `{` and the members before "session" (the one member that depends on who views the task).
    func writeHead(into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        JSONText.key("attempts", &out, first: true)
        JSONText.int(Int64(attempts), &out)
        JSONText.member("bandwidthLimit", bandwidthLimit, &out)
        JSONText.member("bytesDurable", bytesDurable, &out)
        JSONText.member("bytesExpected", bytesExpected, &out, nullable: true)
        JSONText.member("bytesExpectedToSend", bytesExpectedToSend, &out)
        JSONText.member("bytesReceived", bytesReceived, &out)
        JSONText.member("bytesSent", bytesSent, &out)
        JSONText.member("checksum", checksum, &out)
        JSONText.member("connections", connections.map(Int64.init), &out)
        JSONText.member("createdAt", createdAt, &out)
        JSONText.member("currentURL", currentURL, &out)
        JSONText.member("description", description, &out, nullable: true)
        JSONText.member("destination", destination, &out)
        JSONText.member("earliestBeginDate", earliestBeginDate, &out)
        JSONText.member("error", error, &out, nullable: true)
        JSONText.member("etag", etag, &out)
        JSONText.member("file", file, &out)
        JSONText.member("hold", hold, &out)
        JSONText.member("id", id, &out)
        JSONText.member("kind", kind, &out)
        JSONText.member("lastModified", lastModified, &out)
        JSONText.member("location", location, &out)
        JSONText.member("maxConnections", maxConnections.map(Int64.init), &out)
        JSONText.member("method", method, &out)
        JSONText.member("nextAttemptAt", nextAttemptAt, &out)
        if let overwrite {
            JSONText.key("overwrite", &out)
            out.append(contentsOf: (overwrite ? "true" : "false").utf8)
        }
        JSONText.member("phase", phase?.rawValue, &out)
        JSONText.member("priority", priority.rawValue, &out)
        JSONText.member("queuePosition", queuePosition.map(Int64.init), &out)
        JSONText.member("response", response, &out)
    }

    /// The members after "session", and `}`.
    func writeTail(into out: inout [UInt8]) {
        JSONText.member("state", state.rawValue, &out)
        JSONText.member("suggestedFilename", suggestedFilename, &out)
        JSONText.member("updatedAt", updatedAt, &out)
        JSONText.member("url", url, &out)
        JSONText.member("waitingReason", waitingReason, &out)
        out.append(UInt8(ascii: "}"))
    }
}

/// A task's JSON text made once and written again for any viewer: the bytes `TaskInfo.writeJSON` writes, kept in
/// two parts around the session name (which its owner sees without the "uid/" prefix, root with it). A finished
/// task no longer changes, so `task.list` pages keep its text with its journal row and copy it into each page
/// (`Journal.taskPage`), where describing it again made most of a page's cost.
public struct TaskInfoText: JSONTextWritable, Equatable {
    public let session: String
    public let state: TaskState
    let head: [UInt8]
    let tail: [UInt8]

    public init(_ info: TaskInfo) {
        session = info.session
        state = info.state
        var head: [UInt8] = []
        head.reserveCapacity(384)
        info.writeHead(into: &head)
        var tail: [UInt8] = []
        info.writeTail(into: &tail)
        self.head = head
        self.tail = tail
    }

    public func writeJSON(into out: inout [UInt8], unqualifying prefix: String?) {
        out.append(contentsOf: head)
        JSONText.session(session, unqualifying: prefix, &out)
        out.append(contentsOf: tail)
    }
}

/// A `task.list` page as the daemon answers it: the text of a `TaskListResult` of the same tasks, each either
/// described now (`info`: an unfinished task, from memory) or written from the text its row keeps (`text`).
public struct TaskListText: JSONTextWritable, Encodable {
    public enum Item: Sendable {
        case info(TaskInfo)
        case text(TaskInfoText)
    }

    public var items: [Item]
    /// Present when more tasks follow, as in `TaskListResult`.
    public var nextCursor: String?

    public init(items: [Item], nextCursor: String? = nil) {
        self.items = items
        self.nextCursor = nextCursor
    }

    /// `{"nextCursor":…,"tasks":[…]}`, `nextCursor` only when given.
    public func writeJSON(into out: inout [UInt8], unqualifying prefix: String?) {
        out.reserveCapacity(out.count + 64 + items.count * 400)
        out.append(UInt8(ascii: "{"))
        if let nextCursor {
            JSONText.key("nextCursor", &out, first: true)
            JSONWriter.writeString(nextCursor, into: &out)
        }
        JSONText.key("tasks", &out, first: nextCursor == nil)
        out.append(UInt8(ascii: "["))
        for (i, item) in items.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            switch item {
            case .info(let info): info.writeJSON(into: &out, unqualifying: prefix)
            case .text(let text): text.writeJSON(into: &out, unqualifying: prefix)
            }
        }
        out.append(UInt8(ascii: "]"))
        out.append(UInt8(ascii: "}"))
    }

    /// The page as a client reads it (its text decoded), for the daemon's own tests.
    public func decoded() throws -> TaskListResult {
        var text: [UInt8] = []
        writeJSON(into: &text, unqualifying: nil)
        return try JSONParser.parse(text).decode(TaskListResult.self)
    }

    /// The same members through Codable (the daemon writes the text; this is for any other encoder).
    public func encode(to encoder: Encoder) throws {
        var text: [UInt8] = []
        writeJSON(into: &text, unqualifying: nil)
        try JSONParser.parse(text).encode(to: encoder)
    }
}

extension TaskCancelResult: JSONTextWritable {
    public func writeJSON(into out: inout [UInt8], unqualifying prefix: String?) {
        out.append(UInt8(ascii: "{"))
        if let resumeData {
            JSONText.key("resumeData", &out, first: true)
            JSONWriter.writeString(resumeData, into: &out)
        }
        JSONText.key("task", &out, first: resumeData == nil)
        task.writeJSON(into: &out, unqualifying: prefix)
        out.append(UInt8(ascii: "}"))
    }
}

extension Event: JSONTextWritable {
    /// A state change (the event of nearly every control call) written straight to text; any other through its
    /// `JSONValue` (rarer, and of many shapes). The session shows as a task's does to the viewer.
    public func writeJSON(into out: inout [UInt8], unqualifying prefix: String?) {
        guard case let .stateChanged(state, previous, reason) = payload else {
            var value = jsonValue
            if let prefix, session.hasPrefix(prefix), case .object(var members) = value {
                members["session"] = .string(String(session.dropFirst(prefix.count)))
                value = .object(members)
            }
            JSONText.value(value, &out)
            return
        }
        out.append(UInt8(ascii: "{"))
        JSONText.key("previousState", &out, first: true)
        if let previous { JSONWriter.writeString(previous.rawValue, into: &out) } else { JSONText.null(&out) }
        if let reason {
            JSONText.key("reason", &out)
            JSONText.value(reason.jsonValue, &out)
        }
        JSONText.member("seq", seq, &out, nullable: true)
        JSONText.session(session, unqualifying: prefix, &out)
        JSONText.member("state", state.rawValue, &out)
        JSONText.member("task", task, &out, nullable: true)
        JSONText.member("time", time, &out)
        JSONText.member("type", type, &out)
        out.append(UInt8(ascii: "}"))
    }
}

public extension RPCNotification {
    /// An event's notification line (`\n`-terminated) for a viewer: the bytes `line()` writes for
    /// `RPCNotification(method: HalfTunes.eventNotification, params: event.jsonValue)` with the viewer's own
    /// session name unqualified, without building the `JSONValue`.
    static func eventLine(_ event: Event, unqualifying prefix: String?) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(192)
        bytes.append(contentsOf: #"{"jsonrpc":"2.0","method":"#.utf8)
        JSONWriter.writeString(HalfTunes.eventNotification, into: &bytes)
        bytes.append(contentsOf: #","params":"#.utf8)
        event.writeJSON(into: &bytes, unqualifying: prefix)
        bytes.append(UInt8(ascii: "}"))
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }
}
