// Desktop notifications over sd-bus on the user's session bus (org.freedesktop.Notifications), and the file
// manager's "show this file" (org.freedesktop.FileManager1).
import CSystemBus
import Foundation

/// Posts notifications and collects the actions the user invokes on them. Not thread-safe: one thread uses it (the
/// agent's loop). The session bus (`DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus`) is connected when first
/// needed and again after a failure.
public final class DesktopNotifier {
    private var bus: OpaquePointer?
    private var actionQueue: OpaquePointer?
    public let appName: String

    public init(appName: String = "halftunesd") {
        self.appName = appName
    }

    deinit { disconnect() }

    /// Posts one notification; `actions` are (key, label) pairs. Returns its id, or why it could not be posted.
    /// `body` is text: for a server that renders markup in bodies (`body-markup`) it is escaped, so a server's
    /// file name or realm cannot put a link or an image into it.
    public func post(summary: String, body: String, actions: [(key: String, label: String)], category: String,
                     icon: String = "folder-download") -> Result<UInt32, NotifierError> {
        guard let bus = connect() else { return .failure(NotifierError("no session bus")) }
        // Asked at each post: the server that answers may have changed since the last (a desktop restarted).
        let markup = htd_bus_has_capability(bus, "body-markup")
        let body = markup == 0 ? body : Self.escapingMarkup(body)
        let strings = actions.flatMap { [$0.key, $0.label] }
        var id: UInt32 = 0
        var message = [CChar](repeating: 0, count: 512)
        let r = withCStrings(strings) { pointers in
            htd_bus_notify(bus, actionQueue, appName, icon, summary, body, pointers, strings.count, category, -1, &id, &message,
                           message.count)
        }
        guard r >= 0 else {
            if r == -ENOTCONN || r == -ECONNRESET || r == -EPIPE { disconnect() }
            return .failure(NotifierError(String(nulTerminated: message)))
        }
        return .success(id)
    }

    /// `text` as the notification specification's body markup shows it literally: `&`, `<` and `>` as entities.
    public static func escapingMarkup(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for c in text.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    /// The actions invoked since the last call (notification id, action key), without waiting.
    public func invokedActions() -> [(id: UInt32, key: String)] {
        guard let bus, let actionQueue else { return [] }
        var result: [(UInt32, String)] = []
        var key = [CChar](repeating: 0, count: 64)
        while true {
            var id: UInt32 = 0
            let r = htd_bus_next_action(bus, actionQueue, &id, &key, key.count)
            if r < 0 { disconnect(); break }
            if r == 0 { break }
            result.append((id, String(nulTerminated: key)))
        }
        return result
    }

    /// Asks the file manager to show `path` selected in its folder.
    public func showInFolder(_ path: String) -> NotifierError? {
        guard let bus = connect() else { return NotifierError("no session bus") }
        var message = [CChar](repeating: 0, count: 512)
        let r = htd_bus_show_items(bus, URL(fileURLWithPath: path).absoluteString, &message, message.count)
        return r < 0 ? NotifierError(String(nulTerminated: message)) : nil
    }

    private func connect() -> OpaquePointer? {
        if let bus { return bus }
        var error: Int32 = 0
        guard let opened = htd_bus_open_session(&error) else { return nil }
        guard let watch = htd_bus_watch_actions(opened, &error) else {
            htd_bus_close(opened)
            return nil
        }
        bus = opened
        actionQueue = watch
        return opened
    }

    private func disconnect() {
        if let bus { htd_bus_close(bus) }
        if let actionQueue { htd_actions_free(actionQueue) }
        bus = nil
        actionQueue = nil
    }
}

public struct NotifierError: Error, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Calls `body` with the strings as a C array of pointers that live for the call.
private func withCStrings<R>(_ strings: [String], _ body: (UnsafeMutablePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    var pointers = copies.map { UnsafePointer<CChar>($0) } + [nil] // never empty
    return pointers.withUnsafeMutableBufferPointer { body($0.baseAddress!) }
}
