@testable import HalfTunesDaemon
import HalfTunesProtocol
import Testing

@Suite("Queue order and limits")
struct QueuePlannerTests {
    typealias Entry = QueuePlanner.Entry
    typealias Running = QueuePlanner.Running

    func entry(_ id: Int64, session: String = "s", host: String = "http://a:80") -> Entry {
        Entry(id: id, session: session, host: host)
    }

    func started(_ decisions: [(Int64, QueuePlanner.Decision)]) -> [Int64] {
        decisions.filter { $0.1 == .start }.map(\.0)
    }

    func reasons(_ decisions: [(Int64, QueuePlanner.Decision)]) -> [Int64: String] {
        var result: [Int64: String] = [:]
        for (id, d) in decisions { if case .hold(let h) = d { result[id] = h.reason } }
        return result
    }

    /// High before normal before low; FIFO (queue order, then id) within a class; negative orders (moved to
    /// the front) first.
    @Test func ordersByPriorityThenQueueOrder() {
        let tasks: [(TaskPriority, Int64, Int64)] = [
            (.low, 1, 1), (.normal, 2, 2), (.high, 9, 3), (.normal, 3, 4), (.high, 4, 5), (.normal, -1, 6), (.low, 5, 7),
        ]
        let sorted = tasks.sorted { QueuePlanner.precedes(($0.0, $0.1, $0.2), ($1.0, $1.1, $1.2)) }.map(\.2)
        #expect(sorted == [5, 3, 6, 2, 4, 1, 7])
        #expect(QueuePlanner.precedes((.normal, 5, 1), (.normal, 5, 2)))
    }

    @Test func frontOrderIsBelowEveryOtherAndNegative() {
        #expect(QueuePlanner.frontOrder(among: []) == -1)
        #expect(QueuePlanner.frontOrder(among: [4, 7]) == -1)
        #expect(QueuePlanner.frontOrder(among: [3, -2]) == -3)
    }

    @Test func daemonWideLimitHoldsEverythingBehind() {
        let limits = QueuePlanner.Limits(maxConcurrent: 2, maxConnectionsPerHost: 6)
        let d = QueuePlanner.plan(queue: [entry(1), entry(2), entry(3)], running: [Running(session: "s", host: "http://a:80")],
                                  limits: limits)
        #expect(started(d) == [1])
        #expect(reasons(d) == [2: "maxConcurrent", 3: "maxConcurrent"])
        guard case .hold(let hold) = d[2].1 else { Issue.record("not held"); return }
        #expect(hold.message == "2 of 2 daemon-wide transfer slots in use; 2 tasks ahead in the queue")
        // The scheduler stops looking once nothing more can start.
        let starts = QueuePlanner.plan(queue: [entry(1), entry(2), entry(3)], running: [Running(session: "s", host: "h")],
                                       limits: limits, stopWhenFull: true)
        #expect(starts.map(\.0) == [1])
    }

    /// A session or host at its limit holds its own tasks only: later tasks of others still start.
    @Test func sessionAndHostLimitsSkipAhead() {
        let limits = QueuePlanner.Limits(maxConcurrent: 10, maxConnectionsPerHost: 2, sessionMaxConcurrent: ["one": 1])
        let queue = [entry(1, session: "one"), entry(2, session: "one"), entry(3, session: "two", host: "http://b:80"),
                     entry(4, session: "two"), entry(5, session: "two"), entry(6, session: "two", host: "http://b:80")]
        let d = QueuePlanner.plan(queue: queue, running: [Running(session: "two", host: "http://a:80")], limits: limits)
        #expect(started(d) == [1, 3, 6])
        #expect(reasons(d) == [2: "sessionMaxConcurrent", 4: "hostMaxConnections", 5: "hostMaxConnections"])
        guard case .hold(let session) = d[1].1, case .hold(let host) = d[3].1 else { Issue.record("not held"); return }
        #expect(session.message.contains("1 of 1 transfers of session 'one'"))
        #expect(host.message.contains("2 of 2 connections to http://a:80"))
    }

    @Test func aStoppingTransferHoldsOnlyItsTaskAndPlanStopsAtUntil() {
        var first = entry(1)
        first.stopping = true
        let limits = QueuePlanner.Limits(maxConcurrent: 1, maxConnectionsPerHost: 6)
        let d = QueuePlanner.plan(queue: [first, entry(2), entry(3)], running: [], limits: limits)
        #expect(reasons(d) == [1: "previousTransferStopping", 3: "maxConcurrent"])
        #expect(started(d) == [2])
        #expect(QueuePlanner.plan(queue: [first, entry(2), entry(3)], running: [], limits: limits, until: 2).count == 2)
    }

    @Test func hostKeysNameSchemeHostAndPort() {
        #expect(HostKey.of("http://Example.ORG/a?b") == "http://example.org:80")
        #expect(HostKey.of("https://example.org/") == "https://example.org:443")
        #expect(HostKey.of("HTTPS://user:pw@example.org:8443/x") == "https://example.org:8443")
        #expect(HostKey.of("http://127.0.0.1:8080") == "http://127.0.0.1:8080")
        #expect(HostKey.of("http://[::1]:81/f") == "http://[::1]:81")
        #expect(HostKey.of("http://[::1]/f") == "http://[::1]:80")
        #expect(HostKey.of("http://a:80/x") == HostKey.of("http://A/y"))
    }

    /// The byte-by-byte reading of ASCII URLs gives what the general one gives, odd URLs included; a URL with
    /// other characters is read the general way.
    @Test func hostKeysOfASCIIURLsAreTheGeneralOnes() {
        let urls = ["http://Example.ORG/a?b", "https://example.org/", "HTTPS://user:pw@example.org:8443/x",
                    "http://127.0.0.1:8080", "http://[::1]:81/f", "http://[::1]/f", "http://[::1", "http://[::1]x:9/",
                    "http://a:/x", "http://h?x=1", "http://h#f", "example.org:81/x", "example.org", "", ":", "://",
                    "ftp://a@b@c:7", "http://u:p@[fe80::1]:8080/p", "HTTP://H:443", "https://h:80/", "http://h:8:9/",
                    "http:/h/x", "http://a\r\nb:1/", "HtTpS://MiXeD.Example:0443?q#f", "http://@/", "http:///x"]
        for url in urls {
            var bytes = url
            let fast = bytes.withUTF8 { HostKey.ascii($0) }
            #expect(fast == HostKey.general(url), "\(url)")
            #expect(HostKey.of(url) == HostKey.general(url), "\(url)")
        }
        #expect(HostKey.of("http://Ünï.example:81/x") == "http://ünï.example:81")
    }
}

@Suite("Limit settings")
struct LimitSettingsTests {
    @Test func bandwidthAndPerHostKeysParse() throws {
        var s = DaemonSettings()
        try SettingKey.bandwidthLimit.assign("2M", to: &s)
        #expect(s.bandwidthLimit == 2 << 20)
        try SettingKey.bandwidthLimit.assign("0", to: &s)
        #expect(s.bandwidthLimit == 0)
        try SettingKey.maxConnectionsPerHost.assign("2", to: &s)
        #expect(s.maxConnectionsPerHost == 2)
        #expect(throws: SettingValueError.self) { try SettingKey.bandwidthLimit.assign("2X", to: &s) }
        #expect(throws: SettingValueError.self) { try SettingKey.bandwidthLimit.assign("100", to: &s) }
        #expect(throws: SettingValueError.self) { try SettingKey.maxConnectionsPerHost.assign("0", to: &s) }
        #expect(SettingKey.bandwidthLimit.appliesOnReload && SettingKey.maxConnectionsPerHost.appliesOnReload)
        let resolved = ResolvedSettings(s)
        #expect(resolved.daemonConfiguration.maxConnectionsPerHost == 2)
        #expect(ResolvedSettings(DaemonSettings()).maxConnectionsPerHost == 6)
        #expect(resolved.asSettings.text(for: .bandwidthLimit) == "0")
    }

    /// Between users the queue is shared: whoever runs least goes next, each user's own order kept.
    @Test func usersShareTheQueue() {
        // User 1's five (high) tasks came first, then user 2's two.
        let ordered: [(id: Int64, owner: UInt32)] = [(1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (6, 2), (7, 2)]
        #expect(QueuePlanner.fairOrder(ordered, running: [:]) == [1, 6, 2, 7, 3, 4, 5])
        // User 1 already runs two transfers: user 2 gets the next two places.
        #expect(QueuePlanner.fairOrder(ordered, running: [1: 2]) == [6, 7, 1, 2, 3, 4, 5])
        // One user: the order is theirs, untouched.
        let alone: [(id: Int64, owner: UInt32)] = [(3, 9), (1, 9), (2, 9)]
        #expect(QueuePlanner.fairOrder(alone, running: [9: 4]) == [3, 1, 2])
        // Three users, equal load: round robin in order of their first task.
        let three: [(id: Int64, owner: UInt32)] = [(1, 5), (2, 6), (3, 5), (4, 7), (5, 6), (6, 5)]
        #expect(QueuePlanner.fairOrder(three, running: [:]) == [1, 2, 4, 3, 5, 6])
        #expect(QueuePlanner.fairOrder([], running: [1: 1]).isEmpty)
        // Equal loads: the user served longest ago goes first (never served: first of all).
        #expect(QueuePlanner.fairOrder(ordered, running: [:], lastServed: [1: 7]) == [6, 1, 7, 2, 3, 4, 5])
        #expect(QueuePlanner.fairOrder(ordered, running: [:], lastServed: [1: 3, 2: 8]) == [1, 6, 2, 7, 3, 4, 5])
    }
}
