import Foundation
import HalfTunesProtocol

/// Sessions belong to the uid that opened them: "com.example.app" opened by uid 1000 is the session
/// "1000/com.example.app" inside the daemon, so two users' sessions with the same identifier never meet.
/// Clients only ever see their own identifiers: names are qualified on the way in and unqualified on
/// the way out, here at the wire boundary. Root may name another user's session as "1000/com.example.app"
/// and sees other users' sessions in that form.
enum SessionNames {
    /// The params fields that name a session, per method.
    static let fields: [String: String] = [
        RPCMethod.sessionOpen.rawValue: "identifier",
        RPCMethod.sessionInvalidate.rawValue: "identifier",
        RPCMethod.taskCreate.rawValue: "session",
        RPCMethod.taskList.rawValue: "session",
        RPCMethod.eventsSubscribe.rawValue: "session",
        RPCMethod.eventsAck.rawValue: "session",
        RPCMethod.agentStarted.rawValue: "session",
        RPCMethod.agentEnded.rawValue: "session",
    ]

    static func qualified(_ name: String, uid: UInt32) -> String { "\(uid)/\(name)" }

    /// The owner uid of a qualified name.
    static func owner(of key: String) -> UInt32? {
        guard let slash = key.firstIndex(of: "/") else { return nil }
        return UInt32(key[..<slash])
    }

    /// The identifier the owner chose (without the uid).
    static func name(of key: String) -> String {
        key.firstIndex(of: "/").map { String(key[key.index(after: $0)...]) } ?? key
    }

    /// What `viewer` calls the session `key`: its own sessions without the prefix.
    static func presented(_ key: String, to viewer: UInt32) -> String {
        let prefix = "\(viewer)/"
        return key.hasPrefix(prefix) ? String(key.dropFirst(prefix.count)) : key
    }

    /// Replaces the session name in `params` (if the method has one) by its qualified form.
    static func qualify(params: JSONValue, method: String, uid: UInt32) throws(RPCError) -> JSONValue {
        guard let field = fields[method], case .object(var object) = params,
              case .string(let name)? = object[field] else { return params }
        if name.contains("/") {
            let parts = name.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            // Root names another user's session by the canonical decimal uid ("1000/x", not "+1000/x" or "01000/x").
            guard uid == 0, parts.count == 2, let owner = UInt32(parts[0]), String(owner) == parts[0],
                  !parts[1].isEmpty, !parts[1].contains("/") else {
                throw RPCError.invalidParams("\(field) must not contain '/'")
            }
            return params // root naming another user's session
        }
        object[field] = .string(qualified(name, uid: uid))
        return .object(object)
    }

    /// What starts the qualified names of `viewer`'s own sessions.
    static func prefix(of viewer: UInt32) -> String { "\(viewer)/" }

    /// `value` with every qualified session name of `viewer`'s own sessions unqualified (the fields
    /// `session` and, in session objects, `identifier`).
    static func present(_ value: JSONValue, to viewer: UInt32) -> JSONValue {
        var value = value
        present(&value, prefix: prefix(of: viewer))
        return value
    }

    /// In place: every object and array is edited where it is (a page of `task.list` is 1,000 objects; copying
    /// and rehashing each of them was a seventh of the page's cost).
    private static func present(_ value: inout JSONValue, prefix: String) {
        switch value {
        case .object(var object):
            value = .null // `object` is now the only reference: edited without a copy
            var i = object.startIndex
            while i != object.endIndex {
                let key = object.keys[i]
                if key == "session" || key == "identifier", case .string(let name) = object.values[i] {
                    if name.hasPrefix(prefix) { object.values[i] = .string(String(name.dropFirst(prefix.count))) }
                } else {
                    present(&object.values[i], prefix: prefix) // a session object under "session" too
                }
                object.formIndex(after: &i)
            }
            value = .object(object)
        case .array(var items):
            value = .null
            for i in items.indices { present(&items[i], prefix: prefix) }
            value = .array(items)
        default:
            break
        }
    }

    /// An error message with the viewer's qualified names unqualified (messages quote names as '…').
    static func present(_ error: RPCError, to viewer: UInt32) -> RPCError {
        var e = error
        e.message = e.message.replacingOccurrences(of: "'\(viewer)/", with: "'")
        return e
    }
}
