// Mapping client, socket and DNS errors to stable TaskError codes, transient or permanent.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
import Darwin
#endif
import AsyncHTTPClient
import HalfTunesCore
import HalfTunesProtocol
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSOCKS
import NIOSSL

/// Why the engine itself cut a request short (the cause is kept in the transfer's state).
enum EngineAbort: Error {
    case stopped
    case idleTimeout
    case decided
    case writeFailed
    /// The request has every byte up to its limit; the rest of its response is another request's.
    case segmentDone
}

enum ErrorMapping {
    /// The idle timeout (`requestTimeout`) ended a download's request.
    static func idleTimeout(_ url: String) -> TaskError {
        TaskError(code: TaskErrorCode.timedOut, message: "No data from \(URLText.hostDescription(url)) within the request timeout")
    }

    /// A TaskError for an error that ended a request, and whether retrying later may help. With a `proxy`, what
    /// went wrong reaching or talking to it is a `proxyFailure` (transient: the task waits and retries).
    static func classify(_ error: Error, url: String, proxy: ProxyServer? = nil) -> (error: TaskError, transient: Bool) {
        if let proxy, let failure = proxyFailure(error, url: url, proxy: proxy) { return (failure, true) }
        let target = URLText.hostDescription(url)
        func lost(_ detail: String) -> (TaskError, Bool) {
            (TaskError(code: TaskErrorCode.connectionLost, message: "Connection to \(target) lost: \(detail)"), true)
        }
        if let e = error as? HTTPClientError {
            switch e {
            case .remoteConnectionClosed:
                return lost("the server closed the connection")
            case .readTimeout, .connectTimeout, .deadlineExceeded, .getConnectionFromPoolTimeout, .tlsHandshakeTimeout:
                return (TaskError(code: TaskErrorCode.timedOut, message: "Timed out talking to \(target) (\(e))"), true)
            case .redirectLimitReached:
                return (TaskError(code: TaskErrorCode.tooManyRedirects,
                                  message: "Too many redirects (more than 10) starting from \(url)"), false)
            case .redirectCycleDetected:
                return (TaskError(code: TaskErrorCode.tooManyRedirects,
                                  message: "Redirect cycle detected starting from \(url)"), false)
            case .invalidURL, .emptyHost, .emptyScheme, .missingSocketPath:
                return (invalidURL(url, detail: "\(e)"), false)
            case .alreadyShutdown:
                return (TaskError(code: TaskErrorCode.internalError, message: "The HTTP client is shut down"), true)
            case .uncleanShutdown:
                return lost("the TLS connection was closed uncleanly")
            default:
                // unsupportedScheme(String) has an associated value, so it cannot be matched as a constant.
                let text = "\(e)".lowercased()
                if text.contains("unsupportedscheme") || text.contains("unsupported scheme") {
                    return (invalidURL(url, detail: "only http and https are supported"), false)
                }
                return (TaskError(code: TaskErrorCode.invalidResponse, message: "HTTP error from \(target): \(e)"), true)
            }
        }
        if let e = error as? NIOSSLExtraError, e == .failedToValidateHostname {
            return (tlsFailure(target, detail: "it is not valid for this host (\(e))"), false)
        }
        if let e = error as? NIOSSLError {
            let text = "\(e)"
            // A certificate that does not verify will not verify on the next attempt either: fail, say why.
            if text.contains("CERTIFICATE_VERIFY_FAILED") || text.lowercased().contains("certificate verify failed") {
                return (tlsFailure(target, detail: "it could not be verified (\(text))"), false)
            }
            return lost("TLS failed: \(text)")
        }
        if let e = error as? NIOConnectionError {
            if e.connectionErrors.isEmpty, let dns = e.dnsAError ?? e.dnsAAAAError {
                let detail = (dns as? SocketAddressError.UnknownHost)?.errorDescription ?? "\(dns)"
                return dnsFailure(host: e.host, detail: detail)
            }
            if let first = e.connectionErrors.first {
                return classify(first.error, url: url)
            }
            return lost("\(e)")
        }
        if let e = error as? SocketAddressError.UnknownHost {
            return dnsFailure(host: e.host, detail: e.errorDescription)
        }
        if let e = error as? IOError {
            switch e.errnoCode {
            case ECONNREFUSED:
                return (TaskError(code: TaskErrorCode.connectionRefused, message: "Connection refused by \(target)"), true)
            case ENETUNREACH, EHOSTUNREACH, ENETDOWN, EHOSTDOWN:
                return (TaskError(code: TaskErrorCode.connectionRefused,
                                  message: "Cannot reach \(target): \(POSIX.describe(e.errnoCode))"), true)
            case ETIMEDOUT:
                return (TaskError(code: TaskErrorCode.timedOut, message: "Timed out talking to \(target)"), true)
            default:
                return lost(POSIX.describe(e.errnoCode))
            }
        }
        if let e = error as? ChannelError {
            switch e {
            case .connectTimeout:
                return (TaskError(code: TaskErrorCode.timedOut, message: "Timed out connecting to \(target)"), true)
            default:
                return lost("\(e)")
            }
        }
        if let e = error as? HTTPParserError {
            switch e {
            case .invalidEOFState, .closedConnection:
                return lost("the response ended early")
            default:
                return (TaskError(code: TaskErrorCode.invalidResponse,
                                  message: "Malformed HTTP response from \(target): \(e)"), true)
            }
        }
        return lost("\(error)")
    }

    /// The `proxyFailure` for an error of a request sent through `proxy`, or nil when the error is not the
    /// proxy's (the origin's answer or a connection lost mid-transfer are classified as without a proxy).
    static func proxyFailure(_ error: Error, url: String, proxy: ProxyServer) -> TaskError? {
        let target = URLText.hostDescription(url)
        func fail(_ message: String) -> TaskError { TaskError(code: TaskErrorCode.proxyFailure, message: message) }
        func unreachable(_ detail: String) -> TaskError { fail("Cannot connect to the proxy \(proxy): \(detail)") }
        if let e = error as? HTTPClientError {
            switch e {
            case .proxyAuthenticationRequired:
                return tunnelRefused(proxy: proxy, url: url,
                                     answer: ProxyProbe.Answer(status: 407, reason: "Proxy Authentication Required"))
            case .invalidProxyResponse:
                return fail("The proxy \(proxy) did not open a tunnel to \(target): its answer to CONNECT was not 2xx "
                    + "(it cannot reach \(target), or it tunnels only to some ports, often just 443)")
            case .httpProxyHandshakeTimeout, .socksHandshakeTimeout:
                return fail("The proxy \(proxy) did not complete its handshake in time")
            case .connectTimeout:
                return unreachable("timed out")
            default:
                return nil
            }
        }
        if let e = error as? ProxyRefusal {
            return tunnelRefused(proxy: proxy, url: url, answer: e.answer)
        }
        if let e = error as? SOCKSError.ConnectionFailed {
            return fail("The SOCKS proxy \(proxy) could not connect to \(target): \(socksReply(e.reply.value))")
        }
        if String(reflecting: type(of: error)).hasPrefix("NIOSOCKS.") {
            return fail("The SOCKS proxy \(proxy) broke the SOCKS5 handshake (\(error))")
        }
        if let e = error as? NIOConnectionError {
            if e.connectionErrors.isEmpty, let dns = e.dnsAError ?? e.dnsAAAAError {
                let detail = (dns as? SocketAddressError.UnknownHost)?.errorDescription ?? "\(dns)"
                return unreachable("cannot resolve its host: \(detail)")
            }
            if let first = e.connectionErrors.first {
                return proxyFailure(first.error, url: url, proxy: proxy) ?? unreachable("\(first.error)")
            }
            return unreachable("\(e)")
        }
        if let e = error as? SocketAddressError.UnknownHost {
            return unreachable("cannot resolve its host: \(e.errorDescription)")
        }
        if let e = error as? IOError {
            switch e.errnoCode {
            // Only what connect() fails with: a timeout or reset of the established tunnel is the transfer's.
            case ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, ENETDOWN, EHOSTDOWN:
                return unreachable(POSIX.describe(e.errnoCode))
            default:
                return nil
            }
        }
        if let e = error as? ChannelError, case .connectTimeout = e {
            return unreachable("timed out")
        }
        return nil
    }

    /// The `proxyFailure` for a CONNECT the proxy answered with `answer` (not 2xx), the status in `httpStatus`.
    static func tunnelRefused(proxy: ProxyServer, url: String, answer: ProxyProbe.Answer) -> TaskError {
        let target = URLText.hostDescription(url)
        let said = "\(answer.status)\(answer.reason.isEmpty ? "" : " " + answer.reason)"
        let message: String
        switch answer.status {
        case 401, 407:
            message = proxy.username.map { "The proxy \(proxy) refused the credentials of user '\($0)' (\(said))" }
                ?? "The proxy \(proxy) asks for credentials (\(said)): give them in the proxy URL, http://user:password@host:port"
        case 403:
            message = "The proxy \(proxy) forbids a tunnel to \(target) (\(said)); many proxies tunnel only to port 443"
        default:
            message = "The proxy \(proxy) did not open a tunnel to \(target): it answered CONNECT with \(said)"
        }
        return TaskError(code: TaskErrorCode.proxyFailure, message: message, httpStatus: answer.status)
    }

    /// RFC 1928's words for a SOCKS5 reply code.
    static func socksReply(_ code: UInt8) -> String {
        switch code {
        case 1: return "general SOCKS server failure"
        case 2: return "connection not allowed by its rules"
        case 3: return "network unreachable"
        case 4: return "host unreachable"
        case 5: return "connection refused"
        case 6: return "TTL expired"
        case 7: return "command not supported"
        case 8: return "address type not supported"
        default: return "reply code \(code)"
        }
    }

    static func invalidURL(_ url: String, detail: String) -> TaskError {
        TaskError(code: TaskErrorCode.invalidResponse, message: "Invalid URL '\(url)': \(detail)")
    }

    static func tlsFailure(_ target: String, detail: String) -> TaskError {
        TaskError(code: TaskErrorCode.tlsFailure, message: "The TLS certificate of \(target) was refused: \(detail). If the "
            + "server uses an internal certificate authority, trust it with the daemon's ca-file setting")
    }

    static func dnsFailure(host: String, detail: String) -> (TaskError, Bool) {
        (TaskError(code: TaskErrorCode.dnsFailure, message: "Cannot resolve host '\(host)': \(detail)"), true)
    }

    /// A message for a URL AsyncHTTPClient refused to build a request for.
    static func requestBuildFailure(_ error: Error, url: String) -> TaskError {
        let lower = url.lowercased()
        if !lower.hasPrefix("http://") && !lower.hasPrefix("https://") {
            let scheme = URLText.splitScheme(url)?.scheme ?? ""
            let detail = scheme.isEmpty ? "it has no scheme" : "scheme '\(scheme)' is not supported"
            return invalidURL(url, detail: "\(detail) (only http and https are)")
        }
        return invalidURL(url, detail: "\(error)")
    }
}
