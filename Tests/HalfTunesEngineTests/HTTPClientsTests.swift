// HTTPClients: clients made for proxies are leased per uid, capped per uid, and closed when idle.
import HalfTunesCore
import HalfTunesEngine
import NIOPosix
import Testing

@Suite struct HTTPClientsTests {
    @Test func proxiedClientsAreCappedPerUIDAndClosedWhenIdle() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let clients = try HTTPClients(eventLoopGroup: group, caFile: nil)
        let proxies = (0...ProxyRules.maxProxiesPerUID).map { ProxyServer(kind: .http, host: "127.0.0.1", port: 3000 + $0) }
        // Direct is never counted.
        for _ in 0..<100 { _ = try clients.lease(for: nil, uid: 1000) }
        for proxy in proxies.dropLast() { _ = try clients.lease(for: proxy, uid: 1000) }
        #expect(throws: HTTPClients.TooManyProxies(uid: 1000, limit: ProxyRules.maxProxiesPerUID)) {
            try clients.lease(for: proxies.last!, uid: 1000)
        }
        // The same proxy again, and another uid, are fine.
        _ = try clients.lease(for: proxies[0], uid: 1000)
        _ = try clients.lease(for: proxies.last!, uid: 1001)
        #expect(clients.proxiedCount == proxies.count)
        // Another uid's client for the 17th proxy is still a 17th proxy for uid 1000.
        #expect(throws: HTTPClients.TooManyProxies(uid: 1000, limit: ProxyRules.maxProxiesPerUID)) {
            try clients.lease(for: proxies.last!, uid: 1000)
        }
        // Nothing leased is ever closed; once released, a client is closed after a minute without use.
        #expect(clients.takeIdle(now: 1_000).isEmpty)
        for proxy in proxies.dropLast() { clients.release(proxy, uid: 1000, now: 100) }
        clients.release(proxies[0], uid: 1000, now: 100)
        clients.release(proxies.last!, uid: 1001, now: 130)
        #expect(clients.takeIdle(now: 159).isEmpty)
        let idle = clients.takeIdle(now: 160)
        #expect(idle.count == proxies.count - 1 && clients.proxiedCount == 1)
        let last = clients.takeIdle(now: 190)
        #expect(last.count == 1 && clients.proxiedCount == 0)
        // A uid's released proxies no longer count against it.
        _ = try clients.lease(for: proxies.last!, uid: 1000)
        for client in idle + last { try await client.shutdown() }
        await clients.shutdown()
        try await group.shutdownGracefully()
    }
}
