// Mapping client, socket and DNS errors to stable TaskError codes, transient or permanent.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
import Darwin
#endif
import AsyncHTTPClient
import HalfTunesProtocol
import NIOCore
import NIOHTTP1
import NIOPosix
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
        TaskError(code: TaskErrorCode.timedOut, message: "No data from \(hostDescription(url)) within the request timeout")
    }

    /// A TaskError for an error that ended a request, and whether retrying later may help.
    static func classify(_ error: Error, url: String) -> (error: TaskError, transient: Bool) {
        let target = hostDescription(url)
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

    /// "host:port" of a URL for messages (the URL itself when it cannot be taken apart).
    static func hostDescription(_ url: String) -> String {
        guard let (_, rest) = splitScheme(url) else { return url }
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let hostPort = authority.split(separator: "@").last.map(String.init) ?? String(authority)
        return hostPort.isEmpty ? url : hostPort
    }

    /// "scheme://rest" → (scheme, rest).
    static func splitScheme(_ url: String) -> (scheme: Substring, rest: Substring)? {
        guard let colon = url.firstIndex(of: ":") else { return nil }
        let after = url[url.index(after: colon)...]
        guard after.hasPrefix("//") else { return nil }
        return (url[..<colon], after.dropFirst(2))
    }

    /// A message for a URL AsyncHTTPClient refused to build a request for.
    static func requestBuildFailure(_ error: Error, url: String) -> TaskError {
        let lower = url.lowercased()
        if !lower.hasPrefix("http://") && !lower.hasPrefix("https://") {
            let scheme = splitScheme(url)?.scheme ?? ""
            let detail = scheme.isEmpty ? "it has no scheme" : "scheme '\(scheme)' is not supported"
            return invalidURL(url, detail: "\(detail) (only http and https are)")
        }
        return invalidURL(url, detail: "\(error)")
    }
}
