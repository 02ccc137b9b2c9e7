// The HTTPClient every transfer shares: raw bytes (no decompression), bounded redirects, no AHC read timeout.
import AsyncHTTPClient
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
    /// timeout (Transfer does idle timeouts itself). A failed connection attempt fails the request at once
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
        return HTTPClient(eventLoopGroupProvider: .shared(eventLoopGroup), configuration: configuration)
    }
}

/// The daemon's HTTP clients: one direct, and one per distinct proxy, made when a request first needs it (a
/// client's proxy is fixed when it is made). Thread-safe.
public final class HTTPClients: Sendable {
    public let direct: HTTPClient
    private let eventLoopGroup: any EventLoopGroup
    private let tls: TLSConfiguration?
    private let proxied = NIOLockedValueBox<[ProxyServer: HTTPClient]>([:])

    /// Makes the direct client; throws what `HTTPClientFactory.make` throws (a bad `caFile`).
    public init(eventLoopGroup: any EventLoopGroup, caFile: String?) throws {
        self.eventLoopGroup = eventLoopGroup
        self.tls = try HTTPClientFactory.tlsConfiguration(caFile: caFile)
        self.direct = HTTPClientFactory.make(eventLoopGroup: eventLoopGroup, tls: tls, proxy: nil)
    }

    /// The client whose requests go through `proxy` (nil: the direct one).
    public func client(for proxy: ProxyServer?) -> HTTPClient {
        guard let proxy else { return direct }
        return proxied.withLockedValue { clients in
            if let client = clients[proxy] { return client }
            let client = HTTPClientFactory.make(eventLoopGroup: eventLoopGroup, tls: tls, proxy: proxy)
            clients[proxy] = client
            return client
        }
    }

    /// Shuts every client down.
    public func shutdown() async {
        let all = proxied.withLockedValue { clients -> [HTTPClient] in
            defer { clients = [:] }
            return Array(clients.values)
        }
        for client in all { try? await client.shutdown() }
        try? await direct.shutdown()
    }
}
