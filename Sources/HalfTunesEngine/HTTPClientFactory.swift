// The HTTPClient every transfer shares: raw bytes (no decompression), bounded redirects, no AHC read timeout.
import AsyncHTTPClient
import NIOCore

public enum HTTPClientFactory {
    /// Decompression disabled; redirects followed (max 10, cycles refused); connect timeout 30 s; no AHC read
    /// timeout (Transfer does idle timeouts itself). A failed connection attempt fails the request at once
    /// (no silent retries inside the client): the daemon schedules retries itself.
    public static func make(eventLoopGroup: any EventLoopGroup) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .follow(max: 10, allowCycles: false),
            timeout: .init(connect: .seconds(30), read: nil),
            decompression: .disabled
        )
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroupProvider: .shared(eventLoopGroup), configuration: configuration)
    }
}
