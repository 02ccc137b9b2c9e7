// Which proxy each task's first request goes through, and how many distinct proxies each uid's attempts use.
import HalfTunesEngine
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

/// The state's view of the per-uid proxy cap (`HTTPClients.maxProxiesPerUID`): each session's proxy rules (its
/// own settings over the daemon's), parsed once when the session or the daemon's rules change; the first proxy of
/// each attempt in flight; and per owner uid the distinct proxies those go through. `grantSlots` holds a queued
/// task whose first proxy would be one too many for its owner (`holds`, O(1)): the engine would refuse it that
/// proxy's client. The engine counts every proxy an attempt leases, redirect hops included, so a redirect to a
/// host behind another proxy can still be refused mid-attempt (`proxyFailure`, retried); the state never holds
/// a task the engine would take.
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
    /// The first proxy of each attempt in flight that goes through one, with its owner.
    private var attempts: [Int64: (owner: UInt32, proxy: ProxyRef)] = [:]
    /// Per owner uid, the distinct proxies its attempts in flight go through first, and how many go through each.
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
        // Without settings of its own, forSession gives the daemon's rules: its tasks share their references.
        if settings.proxy == nil, settings.bypass == nil, settings.tunnel == nil { return daemon }
        return Rules(daemon.rules.forSession(proxy: settings.proxy, bypass: settings.bypass, tunnel: settings.tunnel))
    }

    /// An attempt of task `id` of `owner` started, its first request through `proxy` (nil: direct, not counted).
    mutating func attemptStarted(_ id: Int64, owner: UInt32, proxy: ProxyRef?) {
        attemptEnded(id)
        guard let proxy else { return }
        attempts[id] = (owner, proxy)
        byOwner[owner, default: [:]][proxy, default: 0] += 1
    }

    /// Task `id`'s attempt ended (the engine released its clients before): its proxy no longer counts.
    mutating func attemptEnded(_ id: Int64) {
        guard let (owner, proxy) = attempts.removeValue(forKey: id) else { return }
        let n = byOwner[owner]?[proxy] ?? 0
        byOwner[owner]?[proxy] = n > 1 ? n - 1 : nil
        if byOwner[owner]?.isEmpty == true { byOwner[owner] = nil }
    }

    /// How many distinct proxies `owner`'s attempts in flight go through, when that is the most one uid may use
    /// and a task through `proxy` would need one more; nil when it may start. O(1).
    func holds(owner: UInt32, _ proxy: ProxyRef?) -> Int? {
        guard let proxy, let use = byOwner[owner], use.count >= HTTPClients.maxProxiesPerUID, use[proxy] == nil else {
            return nil
        }
        return use.count
    }
}
