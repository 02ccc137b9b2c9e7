// The HTTPClient every transfer shares: raw bytes (no decompression), bounded redirects, no AHC read timeout.
import AsyncHTTPClient
import HalfTunesCore
import NIOCore
import NIOConcurrencyHelpers
import NIOSSL

public enum HTTPClientFactory {
    /// AsyncHTTPClient's per-host connection limit: the highest `max-connections-per-host` allowed. The daemon
    /// enforces the (runtime-changeable) per-host limit itself by holding tasks in its queue, and one transfer
    /// uses one connection; the pool, fixed when the client is made, must never be the tighter bound, or a
    /// started transfer would wait inside it, invisibly, for a connection.
    public static let connectionsPerHostCeiling = 1000

    /// Decompression disabled; redirects followed (max 10, cycles refused); connect timeout 30 s; no AHC read
    /// timeout (Transfer does idle timeouts itself); HTTP/1 header bytes that are not UTF-8 read as ISO-8859-1. A failed connection attempt fails the request at once
    /// (no silent retries inside the client): the daemon schedules retries itself.
    ///
    /// `caFile`: a PEM file of certificate authorities trusted in addition to the system's (an internal CA);
    /// it must hold at least one certificate. Server certificates are always verified.
    public static func make(eventLoopGroup: any EventLoopGroup, caFile: String? = nil) throws -> HTTPClient {
        make(eventLoopGroup: eventLoopGroup, tls: try tlsConfiguration(caFile: caFile), proxy: nil)
    }

    /// The TLS configuration trusting `caFile` besides the system's (nil: the default one).
    public static func tlsConfiguration(caFile: String?) throws -> TLSConfiguration? {
        guard let caFile else { return nil }
        let certificates = try NIOSSLCertificate.fromPEMFile(caFile)
        guard !certificates.isEmpty else { throw NIOSSLError.failedToLoadCertificate }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.additionalTrustRoots = [.certificates(certificates)]
        return tls
    }

    /// A client as above with `tls` (nil: the default) whose every request goes through `proxy` (nil: direct).
    public static func make(eventLoopGroup: any EventLoopGroup, tls: TLSConfiguration?, proxy: ProxyServer?) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .follow(max: 10, allowCycles: false),
            timeout: .init(connect: .seconds(30), read: nil),
            decompression: .disabled
        )
        if let tls { configuration.tlsConfiguration = tls }
        configuration.proxy = proxy?.clientProxy
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = connectionsPerHostCeiling
        // Header bytes that are not UTF-8 read as ISO-8859-1 (HTTP/1 only; see ResponseHeadRecoder).
        configuration.http1_1ConnectionDebugInitializer = ResponseHeadRecodingHandler.install(on:)
        return HTTPClient(eventLoopGroupProvider: .shared(eventLoopGroup), configuration: configuration)
    }
}

/// The daemon's HTTP clients: one direct, and one per distinct proxy, made when a request first needs it (a
/// client's proxy is fixed when it is made). A proxied client is leased to the uid whose task uses it
/// (`lease`/`release`): a uid may use at most `ProxyRules.maxProxiesPerUID` distinct proxies at once, and a client
/// nobody has leased for `idleLifetime` is closed (`takeIdle`), so clients made for proxies do not pile up.
/// Thread-safe.
public final class HTTPClients: Sendable {
    /// Seconds an unleased proxied client is kept for the next request through the same proxy.
    public static let idleLifetime: Double = 60

    /// A uid asked for more proxies at once than `ProxyRules.maxProxiesPerUID`.
    public struct TooManyProxies: Error, Sendable, Equatable {
        public var uid: UInt32
        public var limit: Int

        public init(uid: UInt32, limit: Int) {
            self.uid = uid
            self.limit = limit
        }
    }

    struct Entry {
        var client: HTTPClient
        /// Plain http requests forwarded to the proxy (HTTP proxies only), on connections of its own.
        var forwarder: ProxyForwarder?
        /// Leases per uid (a uid with none is not a key).
        var leases: [UInt32: Int] = [:]
        var lastReleased: Double
    }

    public let direct: HTTPClient
    let eventLoopGroup: any EventLoopGroup
    private let tls: TLSConfiguration?
    private let proxied = NIOLockedValueBox<[ProxyServer: Entry]>([:])

    /// Makes the direct client; throws what `HTTPClientFactory.make` throws (a bad `caFile`).
    public init(eventLoopGroup: any EventLoopGroup, caFile: String?) throws {
        self.eventLoopGroup = eventLoopGroup
        self.tls = try HTTPClientFactory.tlsConfiguration(caFile: caFile)
        self.direct = HTTPClientFactory.make(eventLoopGroup: eventLoopGroup, tls: tls, proxy: nil)
    }

    /// The client whose requests go through `proxy` (nil: the direct one), unleased (tests, probes).
    public func client(for proxy: ProxyServer?) -> HTTPClient {
        guard let proxy else { return direct }
        return proxied.withLockedValue { clients in
            if let entry = clients[proxy] { return entry.client }
            let client = HTTPClientFactory.make(eventLoopGroup: eventLoopGroup, tls: tls, proxy: proxy)
            clients[proxy] = Entry(client: client, forwarder: Self.forwarder(proxy), lastReleased: 0)
            return client
        }
    }

    /// The client for `proxy` (nil: the direct one, never counted), leased to `uid` until `release`. Throws when
    /// `uid` already leases clients of `ProxyRules.maxProxiesPerUID` other proxies (whoever made this one's client).
    public func lease(for proxy: ProxyServer?, uid: UInt32) throws(TooManyProxies) -> HTTPClient {
        try leaseBoth(for: proxy, uid: uid).client
    }

    /// `lease(for:uid:)`, with the proxy's forwarder (HTTP proxies).
    func leaseBoth(for proxy: ProxyServer?, uid: UInt32) throws(TooManyProxies) -> ProxyClient {
        guard let proxy else { return ProxyClient(client: direct, forwarder: nil) }
        let leased = proxied.withLockedValue { clients -> ProxyClient? in
            // A proxy the uid does not lease yet counts against its limit, even when another uid's transfers
            // made its client already: the limit is on the distinct proxies one uid goes through at once, the
            // rule the daemon's queue holds tasks by (`DaemonState.ProxyUse`). O(proxies), not tasks.
            if clients[proxy]?.leases[uid] == nil {
                let held = clients.values.lazy.filter { $0.leases[uid] != nil }.count
                guard held < ProxyRules.maxProxiesPerUID else { return nil }
            }
            if var entry = clients[proxy] {
                entry.leases[uid, default: 0] += 1
                clients[proxy] = entry
                return ProxyClient(client: entry.client, forwarder: entry.forwarder)
            }
            let client = HTTPClientFactory.make(eventLoopGroup: eventLoopGroup, tls: tls, proxy: proxy)
            let entry = Entry(client: client, forwarder: Self.forwarder(proxy), leases: [uid: 1], lastReleased: 0)
            clients[proxy] = entry
            return ProxyClient(client: client, forwarder: entry.forwarder)
        }
        guard let leased else { throw TooManyProxies(uid: uid, limit: ProxyRules.maxProxiesPerUID) }
        return leased
    }

    private static func forwarder(_ proxy: ProxyServer) -> ProxyForwarder? {
        proxy.kind == .http ? ProxyForwarder(proxy: proxy) : nil
    }

    /// Ends a lease of `lease(for:uid:)` at `now` (seconds, any clock `takeIdle` is given too).
    public func release(_ proxy: ProxyServer?, uid: UInt32, now: Double) {
        guard let proxy else { return }
        proxied.withLockedValue { clients in
            guard var entry = clients[proxy], let n = entry.leases[uid] else { return }
            entry.leases[uid] = n > 1 ? n - 1 : nil
            entry.lastReleased = now
            clients[proxy] = entry
        }
    }

    /// Removes the proxied clients nobody has leased for `idleLifetime` and returns them (the caller shuts them
    /// down). The cost follows the number of proxies, not of tasks.
    public func takeIdle(now: Double) -> [HTTPClient] {
        proxied.withLockedValue { clients in
            let idle = clients.filter { $0.value.leases.isEmpty && now - $0.value.lastReleased >= Self.idleLifetime }
            for key in idle.keys { clients[key] = nil }
            for entry in idle.values { entry.forwarder?.close() }
            return idle.values.map(\.client)
        }
    }

    /// The clients of one uid's attempt: each lease counts against the uid's `ProxyRules.maxProxiesPerUID`; `now` dates the
    /// releases (for `takeIdle`).
    public func leases(uid: UInt32, now: @escaping @Sendable () -> Double) -> any AttemptClients {
        UIDClients(clients: self, uid: uid, now: now)
    }

    struct UIDClients: AttemptClients {
        let clients: HTTPClients
        let uid: UInt32
        let now: @Sendable () -> Double
        var eventLoopGroup: any EventLoopGroup { clients.eventLoopGroup }
        func lease(for proxy: ProxyServer?) throws(TooManyProxies) -> ProxyClient { try clients.leaseBoth(for: proxy, uid: uid) }
        func release(_ proxy: ProxyServer?) { clients.release(proxy, uid: uid, now: now()) }
    }

    /// How many proxied clients are open.
    public var proxiedCount: Int { proxied.withLockedValue { $0.count } }

    /// Shuts every client down.
    public func shutdown() async {
        let all = proxied.withLockedValue { clients -> [HTTPClient] in
            defer { clients = [:] }
            for entry in clients.values { entry.forwarder?.close() }
            return clients.values.map(\.client)
        }
        for client in all { try? await client.shutdown() }
        try? await direct.shutdown()
    }
}

/// The HTTP clients an attempt's requests go through: one per proxy (nil: direct), chosen for each hop of a
/// redirect, leased until the attempt ends.
public protocol AttemptClients: Sendable {
    var eventLoopGroup: any EventLoopGroup { get }
    /// The client whose requests go through `proxy`, with its forwarder; throws when its owner is at its limit of
    /// proxies at once.
    func lease(for proxy: ProxyServer?) throws(HTTPClients.TooManyProxies) -> ProxyClient
    /// Ends one lease of `lease(for:)`.
    func release(_ proxy: ProxyServer?)
}

/// What one proxy's requests go through: AsyncHTTPClient's client (direct, tunnels, SOCKS), and for an HTTP proxy the
/// forwarder of plain http requests (nil: they are tunnelled like https).
public struct ProxyClient: Sendable {
    public let client: HTTPClient
    public let forwarder: ProxyForwarder?

    public init(client: HTTPClient, forwarder: ProxyForwarder?) {
        self.client = client
        self.forwarder = forwarder
    }
}
