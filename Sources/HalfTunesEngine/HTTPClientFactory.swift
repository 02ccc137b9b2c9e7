// The HTTPClient every transfer shares: raw bytes (no decompression), bounded redirects, no AHC read timeout.
import AsyncHTTPClient
import NIOCore
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
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .follow(max: 10, allowCycles: false),
            timeout: .init(connect: .seconds(30), read: nil),
            decompression: .disabled
        )
        if let caFile {
            let certificates = try NIOSSLCertificate.fromPEMFile(caFile)
            guard !certificates.isEmpty else { throw NIOSSLError.failedToLoadCertificate }
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.additionalTrustRoots = [.certificates(certificates)]
            configuration.tlsConfiguration = tls
        }
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = connectionsPerHostCeiling
        return HTTPClient(eventLoopGroupProvider: .shared(eventLoopGroup), configuration: configuration)
    }
}
