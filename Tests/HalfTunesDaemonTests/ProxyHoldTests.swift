import HalfTunesCore
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// One uid's transfers go through at most `ProxyRules.maxProxiesPerUID` different proxies at once: a queued task
/// that needs another waits in the queue (`uidMaxProxies`) instead of starting an attempt the engine would refuse
/// its proxy client; tasks through a proxy already in use, direct ones and other users' start meanwhile.
@Suite("DaemonState: proxies per uid")
struct ProxyHoldTests {
    static let max = ProxyRules.maxProxiesPerUID
    static let limits = DaemonState.SlotLimits(maxConcurrent: 100, maxConnectionsPerHost: 100)

    static func proxy(_ port: Int) -> ProxyRef { ProxyRef(ProxyServer(kind: .http, host: "127.0.0.1", port: port)) }

    static func session(proxy: String?) -> SessionConfiguration {
        var config = SessionConfiguration()
        config.proxy = proxy
        return config
    }

    /// Sessions "p0"…"p16" of uid 1, each with a proxy of its own; "direct" of uid 1 without one; "other" of uid 2
    /// with a 17th proxy.
    static func state() -> DaemonState {
        var sessions = (0...max).map { ("p\($0)", UInt32(1), session(proxy: "http://127.0.0.1:\(3000 + $0)")) }
        sessions.append(("direct", 1, session(proxy: nil)))
        sessions.append(("other", 2, session(proxy: "http://127.0.0.1:\(3000 + max)")))
        return DaemonStateTests.state(sessions: sessions, limits: limits)
    }

    @Test func aTaskThatNeedsOneProxyTooManyWaitsInTheQueue() throws {
        var state = Self.state()
        let busy = (0..<Self.max).map { DaemonStateTests.task(Int64($0 + 1), session: "p\($0)", owner: 1) }
        #expect(try DaemonStateTests.resumeAll(&state, busy, limits: Self.limits).count == Self.max)
        #expect(state.proxies.byOwner[1]?.count == Self.max)
        #expect(state.tasks[1]?.firstProxy == Self.proxy(3000))

        // One more proxy for uid 1: held, with words; nothing is started for it.
        let extra = DaemonStateTests.task(100, session: "p\(Self.max)", owner: 1)
        _ = state.join([extra], now: 1)
        #expect(DaemonStateTests.started(state.handle(.task(100, .resume), now: 1)).isEmpty)
        #expect(state.tasks[100]?.machine.state == .queued)
        let held = try #require(state.tasks[100])
        let hold = try #require(state.hold(held, position: 1))
        #expect(hold.reason == "uidMaxProxies" && hold.message.contains("\(Self.max) different proxies"), "\(hold)")

        // Behind it: a task through a proxy already in use, a direct one, and another uid's through the 17th proxy
        // all start (the held task does not block the queue).
        let same = DaemonStateTests.task(101, session: "p0", owner: 1)
        let direct = DaemonStateTests.task(102, session: "direct", owner: 1)
        let other = DaemonStateTests.task(103, session: "other", owner: 2)
        _ = state.join([same, direct, other], now: 2)
        for id: Int64 in [101, 102, 103] {
            #expect(DaemonStateTests.started(state.handle(.task(id, .resume), now: 2)) == [id])
        }
        #expect(state.proxies.byOwner[1]?[Self.proxy(3000)] == 2)
        #expect(state.tasks[100]?.machine.state == .queued)

        // The proxy of task 2 stays in use while its transfer stops after a suspend; once it ended, 100 starts.
        #expect(DaemonStateTests.started(state.handle(.task(2, .suspend), now: 3)).isEmpty)
        #expect(state.tasks[100]?.machine.state == .queued)
        let ended = state.handle(.attemptEnded(2, .stopped(durableBytes: 0), jitterSample: 0), now: 4)
        #expect(DaemonStateTests.started(ended) == [100])
        #expect(state.proxies.byOwner[1]?.count == Self.max)
        #expect(state.proxies.byOwner[1]?[Self.proxy(3001)] == nil)
    }

    /// The daemon's own proxy rules count too (a session without its own proxy uses them), and a reload that
    /// sends such tasks direct lets a held one start at once.
    @Test func theDaemonsRulesCountAndAReloadReleasesAHeldTask() throws {
        var state = Self.state()
        let busy = (0..<Self.max).map { DaemonStateTests.task(Int64($0 + 1), session: "p\($0)", owner: 1) }
        #expect(try DaemonStateTests.resumeAll(&state, busy, limits: Self.limits).count == Self.max)
        let daemonProxy = ProxyRules(all: ProxyServer(kind: .http, host: "127.0.0.1", port: 4000), bypass: .none, source: "test")
        _ = state.handle(.proxyRulesChanged(daemonProxy), now: 1)
        let viaDaemon = DaemonStateTests.task(200, session: "direct", owner: 1)
        _ = state.join([viaDaemon], now: 1)
        #expect(DaemonStateTests.started(state.handle(.task(200, .resume), now: 1)).isEmpty)
        let held = try #require(state.tasks[200])
        #expect(state.hold(held, position: 1)?.reason == "uidMaxProxies")
        #expect(DaemonStateTests.started(state.handle(.proxyRulesChanged(.none), now: 2)) == [200])
        #expect(state.tasks[200]?.firstProxy == nil && state.proxies.byOwner[1]?.count == Self.max)
    }

    /// A held task's queue entry carries its first proxy (the hold is read from it, not worked out per task); a
    /// reconfigured session whose tasks now go direct lets its held task start, and one that moves them to a
    /// proxy in use does too.
    @Test func aReconfiguredSessionsTasksAreCountedByTheirNewProxy() throws {
        var state = Self.state()
        let busy = (0..<Self.max).map { DaemonStateTests.task(Int64($0 + 1), session: "p\($0)", owner: 1) }
        #expect(try DaemonStateTests.resumeAll(&state, busy, limits: Self.limits).count == Self.max)
        let extra = DaemonStateTests.task(100, session: "p\(Self.max)", owner: 1)
        let later = DaemonStateTests.task(101, session: "p\(Self.max)", owner: 1)
        _ = state.join([extra, later], now: 1)
        #expect(DaemonStateTests.started(state.handle(.task(100, .resume), now: 1)).isEmpty)
        #expect(DaemonStateTests.started(state.handle(.task(101, .resume), now: 1)).isEmpty)
        #expect(state.tasks.queue.entry(100)?.proxy == Self.proxy(3000 + Self.max))

        // Through p0's proxy (in use already): both start at once.
        let started = state.handle(.sessionConfigured("p\(Self.max)", Self.session(proxy: "http://127.0.0.1:3000")), now: 2)
        #expect(DaemonStateTests.started(started) == [100, 101])
        #expect(state.proxies.byOwner[1]?[Self.proxy(3000)] == 3 && state.proxies.byOwner[1]?.count == Self.max)
        #expect(state.proxyRules(session: "p\(Self.max)").http == Self.proxy(3000).server, "the attempt's rules are the ones counted")

        // A session's settings that do not change what its tasks go through leave them as they are.
        #expect(state.proxies.byOwner[1]?[Self.proxy(3001)] == 1)
        _ = state.handle(.sessionConfigured("p1", Self.session(proxy: "http://127.0.0.1:3001")), now: 3)
        #expect(state.proxies.byOwner[1]?[Self.proxy(3001)] == 1)
    }

    /// A proxy an attempt leased for a redirect hop (`proxyLeased`) counts like its first one until the attempt
    /// ends, once however often it is reported: 15 first proxies and one hop make 16, and a 17th waits.
    @Test func aRedirectHopsProxyCountsUntilTheAttemptEnds() throws {
        var state = Self.state()
        let busy = (0..<(Self.max - 1)).map { DaemonStateTests.task(Int64($0 + 1), session: "p\($0)", owner: 1) }
        #expect(try DaemonStateTests.resumeAll(&state, busy, limits: Self.limits).count == Self.max - 1)
        let hop = ProxyServer(kind: .http, host: "127.0.0.1", port: 4444)
        for _ in 0..<2 { _ = state.handle(.attemptProgress(1, .proxyLeased(hop)), now: 1) }
        _ = state.handle(.attemptProgress(1, .proxyLeased(Self.proxy(3000).server)), now: 1) // its first: no change
        #expect(state.proxies.byOwner[1]?.count == Self.max && state.proxies.byOwner[1]?[ProxyRef(hop)] == 1)
        #expect(state.proxies.byOwner[1]?[Self.proxy(3000)] == 1)

        let extra = DaemonStateTests.task(100, session: "p\(Self.max)", owner: 1)
        _ = state.join([extra], now: 2)
        #expect(DaemonStateTests.started(state.handle(.task(100, .resume), now: 2)).isEmpty)
        #expect(try state.hold(#require(state.tasks[100]), position: 1)?.reason == "uidMaxProxies")
        // A report for a task with no attempt in flight counts nothing.
        _ = state.handle(.attemptProgress(100, .proxyLeased(ProxyServer(kind: .http, host: "127.0.0.1", port: 4445))), now: 2)
        #expect(state.proxies.byOwner[1]?.count == Self.max)

        // Task 1's attempt ends: both its proxies are free, and 100 starts.
        _ = state.handle(.task(1, .suspend), now: 3)
        let ended = state.handle(.attemptEnded(1, .stopped(durableBytes: 0), jitterSample: 0), now: 4)
        #expect(DaemonStateTests.started(ended) == [100])
        #expect(state.proxies.byOwner[1]?[ProxyRef(hop)] == nil && state.proxies.byOwner[1]?[Self.proxy(3000)] == nil)
        #expect(state.proxies.byOwner[1]?.count == Self.max - 1)
    }
}
