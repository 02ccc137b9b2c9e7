// Which proxy each task's first request goes through, and how many distinct proxies each uid's attempts use.
import HalfTunesCore
import HalfTunesProtocol

/// One proxy behind one pointer: every task whose first request goes through it holds the same reference (8
/// bytes per task and per queue entry; users queue 100,000 tasks, most of them direct). Equal by value, so two
/// sessions naming the same proxy count as one, as the engine's clients (`HTTPClients`, keyed by `ProxyServer`).
final class ProxyRef: Hashable, Sendable, CustomStringConvertible {
    let server: ProxyServer
    private let hash: Int

    init(_ server: ProxyServer) {
        self.server = server
        hash = server.hashValue
    }

    static func == (a: ProxyRef, b: ProxyRef) -> Bool { a === b || (a.hash == b.hash && a.server == b.server) }
    func hash(into hasher: inout Hasher) { hasher.combine(hash) }
    var description: String { server.description }
}

/// The state's view of the per-uid proxy cap (`ProxyRules.maxProxiesPerUID`): each session's proxy rules (its
/// own settings over the daemon's), parsed once when the session or the daemon's rules change; the first proxy of
/// each attempt in flight and those its redirect hops and segments leased (reported by the runner as the engine
/// leases them); and per owner uid the distinct proxies those go through, the engine's count. `grantSlots` holds
/// a queued task whose first proxy would be one too many for its owner (`holds`, O(1)): the engine would refuse it
/// that proxy's client. Left to the engine's refusal (`proxyFailure`, retried): a redirect hop that needs one too
/// many, and a first request started in the moment between another attempt's hop leasing a proxy and the state
/// hearing of it.
struct ProxyUse {
    /// The rules of one session with their proxies as the references its tasks hold.
    struct Rules: Equatable {
        var rules: ProxyRules
        var http: ProxyRef?
        var https: ProxyRef?

        init(_ rules: ProxyRules) {
            self.rules = rules
            http = rules.http.map(ProxyRef.init)
            https = rules.https == rules.http ? http : rules.https.map(ProxyRef.init)
        }

        static func == (a: Rules, b: Rules) -> Bool { a.rules == b.rules }

        /// The proxy a request to `url` goes through first, as the engine chooses it (`ProxyRules.proxy(for:)`).
        func first(for url: String) -> ProxyRef? {
            guard !rules.isDirect, let server = rules.proxy(for: url) else { return nil }
            if server == http?.server { return http }
            if server == https?.server { return https }
            return ProxyRef(server)
        }
    }

    /// The daemon's rules (`proxyRulesChanged`), and each session's settings with the rules they make.
    private(set) var daemonRules = Rules(.none)
    private var sessions: [String: (settings: Settings, rules: Rules)] = [:]
    /// A session's own proxy settings (`SessionConfiguration`).
    struct Settings: Equatable {
        var proxy: String?
        var bypass: String?
        var tunnel: Bool?

        init(_ config: SessionConfiguration) {
            proxy = config.proxy
            bypass = config.proxyBypass
            tunnel = config.proxyTunnel
        }
    }
    /// The proxies each attempt in flight goes through (its first request's, counted when it starts, and those
    /// its redirect hops and segments leased), with its owner.
    private var attempts: [Int64: (owner: UInt32, proxies: [ProxyRef])] = [:]
    /// Per owner uid, the distinct proxies its attempts in flight go through, and how many attempts go through each.
    private(set) var byOwner: [UInt32: [ProxyRef: Int]] = [:]

    /// The proxy the first request of a task of `session` to `url` goes through (nil: direct). O(1) for a session
    /// whose rules are direct; otherwise the URL is parsed as the engine parses it.
    func first(for url: String, session: String) -> ProxyRef? {
        (sessions[session]?.rules ?? daemonRules).first(for: url)
    }

    /// The rules of `session`'s attempts (the daemon's for a session it does not know).
    func rules(session: String) -> ProxyRules {
        (sessions[session]?.rules ?? daemonRules).rules
    }

    /// A session was opened, restored or reconfigured: whether its rules changed (its tasks' first proxies are
    /// then worked out again).
    mutating func configure(session: String, _ config: SessionConfiguration) -> Bool {
        let settings = Settings(config)
        if let old = sessions[session], old.settings == settings { return false }
        let rules = Self.rules(settings, over: daemonRules)
        let old = sessions.updateValue((settings, rules), forKey: session)
        return old.map { $0.rules != rules } ?? true
    }

    mutating func remove(session: String) {
        sessions[session] = nil
    }

    /// The daemon's rules changed (at start, on a reload): the sessions whose rules changed with them. O(sessions).
    mutating func setDaemonRules(_ rules: ProxyRules) -> [String] {
        daemonRules = Rules(rules)
        var changed: [String] = []
        for (session, entry) in sessions {
            let new = Self.rules(entry.settings, over: daemonRules)
            guard new != entry.rules else { continue }
            sessions[session] = (entry.settings, new)
            changed.append(session)
        }
        return changed.sorted()
    }

    /// What `DaemonCore` gives an attempt: the session's settings over the daemon's rules (`forSession`).
    private static func rules(_ settings: Settings, over daemon: Rules) -> Rules {
        let rules = daemon.rules.forSession(proxy: settings.proxy, bypass: settings.bypass, tunnel: settings.tunnel)
        return rules == daemon.rules ? daemon : Rules(rules) // the daemon's: its tasks share their references
    }

    /// An attempt of task `id` of `owner` started, its first request through `proxy` (nil: direct, not counted):
    /// counted before the engine leases it, so nothing started meanwhile takes the place.
    mutating func attemptStarted(_ id: Int64, owner: UInt32, proxy: ProxyRef?) {
        attemptEnded(id)
        if let proxy { leased(id, owner: owner, proxy) }
    }

    /// Task `id`'s attempt leased `proxy`'s client (`Progress.proxyLeased`): counted until the attempt ends, once
    /// per attempt. An attempt holds a few proxies at most (its hops): the list is searched.
    mutating func leased(_ id: Int64, owner: UInt32, _ proxy: ProxyRef) {
        var entry = attempts[id] ?? (owner, [])
        guard !entry.proxies.contains(proxy) else { return }
        entry.proxies.append(proxy)
        attempts[id] = entry
        byOwner[owner, default: [:]][proxy, default: 0] += 1
    }

    /// Task `id`'s attempt ended (the engine released its clients before): its proxies no longer count.
    mutating func attemptEnded(_ id: Int64) {
        guard let (owner, proxies) = attempts.removeValue(forKey: id) else { return }
        for proxy in proxies {
            let n = byOwner[owner]?[proxy] ?? 0
            byOwner[owner]?[proxy] = n > 1 ? n - 1 : nil
        }
        if byOwner[owner]?.isEmpty == true { byOwner[owner] = nil }
    }

    /// How many distinct proxies `owner`'s attempts in flight go through, when that is the most one uid may use
    /// and a task through `proxy` would need one more; nil when it may start. O(1).
    func holds(owner: UInt32, _ proxy: ProxyRef?) -> Int? {
        guard let proxy, let use = byOwner[owner], use.count >= ProxyRules.maxProxiesPerUID, use[proxy] == nil else {
            return nil
        }
        return use.count
    }
}
