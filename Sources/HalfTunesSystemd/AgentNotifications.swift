// What is posted for the daemon's notices: a burst grouped into one notification, and what each action does.
import Foundation
import HalfTunesProtocol

/// Notices (`agent.notify`) wait `window` seconds after the first of a burst, then go out as one notification:
/// one task's own ("Download completed: thesis.pdf — 2.4 MB in 3s", with "Open" and "Show in folder"), or a summary
/// ("12 downloads completed, 1 failed", the first names, "Show in folder"). A burst is at most `maxBatch` notices;
/// more start the next one. The clock is injected (`now` in each event).
public struct AgentNotifications: Sendable {
    public struct Post: Equatable, Sendable {
        public var summary: String
        public var body: String
        /// (key, label) pairs, as the notification server takes them.
        public var actions: [Action]
        /// The files its actions open or show.
        public var open: String?
        public var folder: String?
        /// The specification's hint: "transfer.complete", or "transfer.error" when every one failed.
        public var category: String = "transfer.complete"
    }

    public struct Action: Equatable, Sendable {
        public var key: String
        public var label: String
    }

    public enum Effect: Equatable, Sendable {
        case post(Post)
        /// `xdg-open` the file.
        case open(String)
        /// The file manager shows the file in its folder.
        case showInFolder(String)
    }

    public let window: Double
    public let maxBatch: Int
    private var pending: [AgentNotice] = []
    private var firstAt: Double?
    /// What each posted notification's actions act on, by its id (the most recent `keep` only).
    private var posted: [UInt32: Post] = [:]
    private var postedOrder: [UInt32] = []
    static let keep = 200

    public init(window: Double = 2, maxBatch: Int = 50) {
        self.window = window
        self.maxBatch = maxBatch
    }

    /// Whether notices wait for their burst's window to pass.
    public var isWaiting: Bool { !pending.isEmpty }

    /// A notice arrived.
    public mutating func received(_ notice: AgentNotice, now: Double) -> [Effect] {
        if firstAt == nil { firstAt = now }
        pending.append(notice)
        return pending.count >= maxBatch ? flush() : []
    }

    /// Time passed: the burst goes out once its window has passed.
    public mutating func tick(now: Double) -> [Effect] {
        guard let first = firstAt, now - first >= window else { return [] }
        return flush()
    }

    /// The notification server gave the post this id.
    public mutating func posted(_ post: Post, id: UInt32) {
        posted[id] = post
        postedOrder.append(id)
        if postedOrder.count > Self.keep { posted[postedOrder.removeFirst()] = nil }
    }

    /// The user chose an action on notification `id` ("default" is a click on the notification itself: it opens
    /// one task's file, or shows a burst's first file in its folder).
    public func invoked(id: UInt32, key: String) -> [Effect] {
        guard let post = posted[id] else { return [] }
        switch key {
        case "open", "default": return post.open.map { [.open($0)] } ?? post.folder.map { [.showInFolder($0)] } ?? []
        case "show": return post.folder.map { [.showInFolder($0)] } ?? []
        default: return []
        }
    }

    private mutating func flush() -> [Effect] {
        defer { pending = []; firstAt = nil }
        guard !pending.isEmpty else { return [] }
        return [.post(Self.post(for: pending))]
    }

    static func post(for notices: [AgentNotice]) -> Post {
        let located = notices.compactMap(\.location)
        if notices.count == 1, let n = notices.first {
            var actions: [Action] = []
            if n.location != nil {
                actions = [Action(key: "default", label: "Open"), Action(key: "show", label: "Show in folder")]
            }
            return Post(summary: "\(noun(n.kind, 1).capitalizedFirst) \(outcome(n.state))", body: detail(n), actions: actions,
                        open: n.location, folder: n.location, category: category(notices))
        }
        let kinds = Set(notices.map(\.kind))
        let noun = kinds.count == 1 ? Self.noun(kinds.first!, notices.count) : "transfers"
        var counts: [String] = []
        for state in [TaskState.completed, .failed, .canceled] {
            let n = notices.filter { $0.state == state }.count
            if n > 0 { counts.append("\(n) \(outcome(state))") }
        }
        let summary = counts.count == 1 && notices.allSatisfy({ $0.state == notices[0].state })
            ? "\(notices.count) \(noun) \(outcome(notices[0].state))"
            : "\(notices.count) \(noun) finished: " + counts.joined(separator: ", ")
        var lines = notices.prefix(5).map { n in n.state == .completed ? n.name : "\(n.name) (\(outcome(n.state)))" }
        if notices.count > 5 { lines.append("and \(notices.count - 5) more") }
        let actions = located.isEmpty ? [] : [Action(key: "default", label: "Show in folder")]
        return Post(summary: summary, body: lines.joined(separator: "\n"), actions: actions, open: nil, folder: located.first,
                    category: category(notices))
    }

    static func category(_ notices: [AgentNotice]) -> String {
        notices.allSatisfy { $0.state == .failed } ? "transfer.error" : "transfer.complete"
    }

    /// "thesis.pdf — 2.4 MB in 3s", or the failure's reason.
    static func detail(_ n: AgentNotice) -> String {
        if n.state == .failed { return "\(n.name): \(n.error ?? "failed")" }
        var parts = [n.name]
        if let bytes = n.bytes, n.state == .completed { parts.append(Formatting.bytes(bytes) + " in " + Formatting.duration(n.seconds)) }
        return parts.joined(separator: " — ")
    }

    static func noun(_ kind: TaskKind, _ count: Int) -> String {
        let word = switch kind {
        case .download: "download"
        case .upload: "upload"
        default: "transfer"
        }
        return count == 1 ? word : word + "s"
    }

    static func outcome(_ state: TaskState) -> String {
        switch state {
        case .completed: return "completed"
        case .failed: return "failed"
        case .canceled: return "canceled"
        default: return state.rawValue
        }
    }
}

private extension String {
    var capitalizedFirst: String { prefix(1).uppercased() + dropFirst() }
}
