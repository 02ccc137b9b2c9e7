// The per-uid proxy cap as the state holds it: each task's first proxy kept current, attempts' proxies counted.
import HalfTunesCore
import HalfTunesProtocol

extension DaemonState {
    /// The daemon's proxy rules changed (at start, on a reload): the tasks of the sessions whose rules changed
    /// with them get their first proxy again, and a task held for a proxy may start now.
    mutating func proxyRulesChanged(_ rules: ProxyRules, now: Double, into actions: inout [Action]) {
        for session in proxies.setDaemonRules(rules) { refreshFirstProxies(session: session) }
        grantSlots(limits, now: now, into: &actions)
    }

    /// A session was opened, restored or reconfigured: its proxy settings are taken, and when they change what
    /// its tasks go through, their first proxies are worked out again.
    mutating func proxySettings(session: String, _ configuration: SessionConfiguration) {
        if proxies.configure(session: session, configuration) { refreshFirstProxies(session: session) }
    }

    /// The proxy rules an attempt of a task of `session` goes through, hop by hop (the session's own settings over
    /// the daemon's): the same rules the queue counted its first proxy by.
    func proxyRules(session: String) -> ProxyRules {
        proxies.rules(session: session)
    }

    /// `t` with its first proxy under its session's rules now (a task entering the state).
    func withFirstProxy(_ t: ManagedTask) -> ManagedTask {
        var t = t
        t.firstProxy = proxies.first(for: t.record.url, session: t.record.session)
        return t
    }

    /// O(the session's tasks in memory), on a change of proxy settings only: never on a task's own path.
    private mutating func refreshFirstProxies(session: String) {
        for id in tasks.ids(session: session) {
            guard let t = tasks[id] else { continue }
            let proxy = proxies.first(for: t.record.url, session: session)
            if proxy != t.firstProxy { tasks[id]?.firstProxy = proxy } // a queued one is re-indexed with it
        }
    }
}
