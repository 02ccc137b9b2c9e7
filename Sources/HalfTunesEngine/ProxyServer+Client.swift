// A proxy server as AsyncHTTPClient's configuration names it.
import AsyncHTTPClient
import HalfTunesCore

extension ProxyServer {
    /// AsyncHTTPClient's configuration for it.
    public var clientProxy: HTTPClient.Configuration.Proxy {
        switch kind {
        case .http:
            let authorization = username.map { HTTPClient.Authorization.basic(username: $0, password: password ?? "") }
            return .server(host: host, port: port, authorization: authorization)
        case .socks5, .socks5h:
            return .socksServer(host: host, port: port)
        }
    }
}
