// The connected agents (`halftunesctl agent`), one per uid: where a user's launch requests go.
import NIOConcurrencyHelpers

/// The connection registered as each uid's agent (`agent.register`). A second registration of a uid replaces the
/// first (a restarted agent does not wait until the daemon notices the old connection died). Thread-safe; O(1).
final class AgentConnections: Sendable {
    private struct State {
        var byUID: [UInt32: Outbox] = [:]
        var uidOf: [UInt64: UInt32] = [:]
        /// `agent.notify` lines for uids without an agent, for the next one (in memory only: never sent twice),
        /// with their event's seq and when they were kept.
        var pending: [UInt32: [(line: [UInt8], seq: Int64?, at: Double)]] = [:]
    }

    /// Notices kept per uid while it has no agent (a restarting agent's gap); the oldest go first.
    static let pendingLimit = 100
    /// How long a kept notice stays worth posting: a notification about a download hours ago is noise.
    static let pendingLifetime: Double = 10 * 60

    private let state = NIOLockedValueBox(State())

    /// Makes `outbox` the agent of `uid`; returns the agent it replaced (nil: none, or the same connection).
    func register(_ outbox: Outbox, uid: UInt32) -> Outbox? {
        state.withLockedValue { s in
            let old = s.byUID[uid]
            if let old { s.uidOf[old.connectionID] = nil }
            s.byUID[uid] = outbox
            s.uidOf[outbox.connectionID] = uid
            return old?.connectionID == outbox.connectionID ? nil : old
        }
    }

    /// The connection `connectionID` closed: the uid it was the agent of, if any.
    func remove(connectionID: UInt64) -> UInt32? {
        state.withLockedValue { s in
            guard let uid = s.uidOf.removeValue(forKey: connectionID) else { return nil }
            s.byUID[uid] = nil
            return uid
        }
    }

    func outbox(of uid: UInt32) -> Outbox? { state.withLockedValue { $0.byUID[uid] } }

    /// Sends a notice to the agent of `uid` (once the commit of the event `seq` is durable), or keeps it for the
    /// next agent of `uid` to register.
    func notify(uid: UInt32, line: [UInt8], seq: Int64?, now: Double) {
        let agent = state.withLockedValue { s -> Outbox? in
            if let agent = s.byUID[uid] { return agent }
            var kept = s.pending[uid, default: []].filter { now - $0.at < Self.pendingLifetime }
            kept.append((line, seq, now))
            if kept.count > Self.pendingLimit { kept.removeFirst(kept.count - Self.pendingLimit) }
            s.pending[uid] = kept
            return nil
        }
        agent?.send(line: line, seq: seq)
    }

    /// The notices kept for `uid` within their lifetime, taken (for the agent that just registered).
    func takePending(uid: UInt32, now: Double) -> [(line: [UInt8], seq: Int64?)] {
        let kept = state.withLockedValue { $0.pending.removeValue(forKey: uid) ?? [] }
        return kept.filter { now - $0.at < Self.pendingLifetime }.map { ($0.line, $0.seq) }
    }

    /// Whether `connectionID` is some uid's agent.
    func isAgent(connectionID: UInt64) -> Bool {
        state.withLockedValue { $0.uidOf[connectionID] != nil }
    }

    /// Whether `connectionID` is the agent of `uid`.
    func isAgent(connectionID: UInt64, uid: UInt32) -> Bool {
        state.withLockedValue { $0.uidOf[connectionID] == uid }
    }
}
