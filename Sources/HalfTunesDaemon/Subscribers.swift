// Each session's live event subscribers by connection, and each connection's sessions, kept together.

/// Who receives a session's live events: its subscribers, one `Outbox` per connection, and the other way round each
/// connection's subscribed sessions (at most `maxSubscriptionsPerConnection`), so a connection closing or
/// subscribing once more costs its own subscriptions, not a walk of every session subscribed to.
struct Subscribers {
    private var bySession: [String: [UInt64: Outbox]] = [:]
    private var byConnection: [UInt64: Set<String>] = [:]

    /// The session's subscribers by connection (nil: none).
    subscript(session: String) -> [UInt64: Outbox]? { bySession[session] }

    func count(of session: String) -> Int { bySession[session]?.count ?? 0 }

    /// How many sessions `connection` is subscribed to, `session` left out.
    func subscriptions(of connection: UInt64, besides session: String) -> Int {
        guard let sessions = byConnection[connection] else { return 0 }
        return sessions.count - (sessions.contains(session) ? 1 : 0)
    }

    /// Subscribes `outbox`'s connection to `session` (replacing its earlier subscription to it).
    mutating func add(_ outbox: Outbox, to session: String) {
        bySession[session, default: [:]][outbox.connectionID] = outbox
        byConnection[outbox.connectionID, default: []].insert(session)
    }

    /// Unsubscribes `connection` from `session`; whether it was subscribed.
    @discardableResult
    mutating func remove(_ connection: UInt64, from session: String) -> Bool {
        guard bySession[session]?.removeValue(forKey: connection) != nil else { return false }
        if bySession[session]?.isEmpty == true { bySession[session] = nil }
        byConnection[connection]?.remove(session)
        if byConnection[connection]?.isEmpty == true { byConnection[connection] = nil }
        return true
    }

    /// Every subscriber of `session` let go; their outboxes.
    mutating func removeSession(_ session: String) -> [Outbox] {
        guard let subscribed = bySession.removeValue(forKey: session) else { return [] }
        for connection in subscribed.keys {
            byConnection[connection]?.remove(session)
            if byConnection[connection]?.isEmpty == true { byConnection[connection] = nil }
        }
        return Array(subscribed.values)
    }

    /// A connection closed: its subscriptions end; the sessions it was subscribed to, sorted.
    mutating func removeConnection(_ connection: UInt64) -> [String] {
        guard let sessions = byConnection.removeValue(forKey: connection) else { return [] }
        for session in sessions {
            bySession[session]?.removeValue(forKey: connection)
            if bySession[session]?.isEmpty == true { bySession[session] = nil }
        }
        return sessions.sorted()
    }
}
