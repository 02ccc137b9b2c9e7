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
        out.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
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

    static func string(_ value: String, _ out: inout [UInt8]) {
        JSONWriter.writeString(value, into: &out)
    }

    static func null(_ out: inout [UInt8]) {
        out.append(contentsOf: [UInt8(ascii: "n"), UInt8(ascii: "u"), UInt8(ascii: "l"), UInt8(ascii: "l")])
    }

    static func bool(_ value: Bool, _ out: inout [UInt8]) {
        out.append(contentsOf: (value ? "true" : "false").utf8)
    }

    /// A nested value without doubles (an error, a hold, a response), through its `JSONValue`: these are rare.
    static func value(_ value: JSONValue, _ out: inout [UInt8]) {
        do {
            try JSONWriter.write(value, into: &out)
        } catch {
            null(&out) // only a non-finite double throws, and these values hold none
        }
    }

    /// A session name as `viewer`'s "uid/" prefix shows it.
    static func session(_ name: String, unqualifying prefix: String?, _ out: inout [UInt8]) {
        if let prefix, name.hasPrefix(prefix) {
            string(String(name.dropFirst(prefix.count)), &out)
        } else {
            string(name, &out)
        }
    }
}

extension TaskInfo: JSONTextWritable {
    /// The members in `JSONWriter`'s order (UTF-8 byte order of the keys); the optional ones only when present,
    /// the nullable ones (`bytesExpected`, `description`, `error`) always, as the Codable conformance writes them.
    public func writeJSON(into out: inout [UInt8], unqualifying prefix: String?) {
        out.append(UInt8(ascii: "{"))
        JSONText.key("attempts", &out, first: true)
        JSONText.int(Int64(attempts), &out)
        if let bandwidthLimit {
            JSONText.key("bandwidthLimit", &out)
            JSONText.int(bandwidthLimit, &out)
        }
        JSONText.key("bytesDurable", &out)
        JSONText.int(bytesDurable, &out)
        JSONText.key("bytesExpected", &out)
        if let bytesExpected { JSONText.int(bytesExpected, &out) } else { JSONText.null(&out) }
        if let bytesExpectedToSend {
            JSONText.key("bytesExpectedToSend", &out)
            JSONText.int(bytesExpectedToSend, &out)
        }
        JSONText.key("bytesReceived", &out)
        JSONText.int(bytesReceived, &out)
        if let bytesSent {
            JSONText.key("bytesSent", &out)
            JSONText.int(bytesSent, &out)
        }
        if let checksum {
            JSONText.key("checksum", &out)
            JSONText.string(checksum, &out)
        }
        JSONText.key("createdAt", &out)
        JSONText.string(createdAt, &out)
        if let currentURL {
            JSONText.key("currentURL", &out)
            JSONText.string(currentURL, &out)
        }
        JSONText.key("description", &out)
        if let description { JSONText.string(description, &out) } else { JSONText.null(&out) }
        JSONText.key("destination", &out)
        JSONText.string(destination, &out)
        JSONText.key("error", &out)
        if let error { JSONText.value(error.jsonValue, &out) } else { JSONText.null(&out) }
        if let etag {
            JSONText.key("etag", &out)
            JSONText.string(etag, &out)
        }
        if let file {
            JSONText.key("file", &out)
            JSONText.string(file, &out)
        }
        if let hold {
            JSONText.key("hold", &out)
            JSONText.value(hold.jsonValue, &out)
        }
        JSONText.key("id", &out)
        JSONText.int(id, &out)
        JSONText.key("kind", &out)
        JSONText.string(kind, &out)
        if let lastModified {
            JSONText.key("lastModified", &out)
            JSONText.string(lastModified, &out)
        }
        if let location {
            JSONText.key("location", &out)
            JSONText.string(location, &out)
        }
        if let method {
            JSONText.key("method", &out)
            JSONText.string(method, &out)
        }
        if let nextAttemptAt {
            JSONText.key("nextAttemptAt", &out)
            JSONText.string(nextAttemptAt, &out)
        }
        if let overwrite {
            JSONText.key("overwrite", &out)
            JSONText.bool(overwrite, &out)
        }
        if let phase {
            JSONText.key("phase", &out)
            JSONText.string(phase.rawValue, &out)
        }
        JSONText.key("priority", &out)
        JSONText.string(priority.rawValue, &out)
        if let queuePosition {
            JSONText.key("queuePosition", &out)
            JSONText.int(Int64(queuePosition), &out)
        }
        if let response {
            JSONText.key("response", &out)
            JSONText.value(response.jsonValue, &out)
        }
        JSONText.key("session", &out)
        JSONText.session(session, unqualifying: prefix, &out)
        JSONText.key("state", &out)
        JSONText.string(state.rawValue, &out)
        JSONText.key("updatedAt", &out)
        JSONText.string(updatedAt, &out)
        JSONText.key("url", &out)
        JSONText.string(url, &out)
        if let waitingReason {
            JSONText.key("waitingReason", &out)
            JSONText.value(waitingReason.jsonValue, &out)
        }
        out.append(UInt8(ascii: "}"))
    }
}

extension TaskListResult: JSONTextWritable {
    public func writeJSON(into out: inout [UInt8], unqualifying prefix: String?) {
        out.reserveCapacity(out.count + 64 + tasks.count * 400)
        out.append(UInt8(ascii: "{"))
        if let nextCursor {
            JSONText.key("nextCursor", &out, first: true)
            JSONText.string(nextCursor, &out)
        }
        JSONText.key("tasks", &out, first: nextCursor == nil)
        out.append(UInt8(ascii: "["))
        for (i, task) in tasks.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            task.writeJSON(into: &out, unqualifying: prefix)
        }
        out.append(contentsOf: [UInt8(ascii: "]"), UInt8(ascii: "}")])
    }
}
