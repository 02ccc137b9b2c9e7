// A proxy URL (`http://[user:pass@]host:port`, `socks5://`, `socks5h://`) parsed, checked and redacted.
import Foundation

/// One proxy server. `http` is an HTTP proxy: https goes through it with `CONNECT` (AsyncHTTPClient), plain http
/// is forwarded to it in absolute form (`ProxyForwarder`) unless the rules tunnel it too; `socks5` and `socks5h` are a SOCKS5 proxy, which is given the host name to resolve
/// in both cases (AsyncHTTPClient's SOCKS client never resolves it locally).
public struct ProxyServer: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable {
        case http, socks5, socks5h
    }

    public var kind: Kind
    /// Without IPv6 brackets.
    public var host: String
    public var port: Int
    /// Percent-decoded user name and password (HTTP proxies only).
    public var username: String?
    public var password: String?

    /// The port a proxy URL without one gets, as curl does: 1080 for every kind.
    public static let defaultPort = 1080
    /// What replaces a password wherever a proxy is shown.
    public static let redactedPassword = "***"

    public init(kind: Kind, host: String, port: Int, username: String? = nil, password: String? = nil) {
        self.kind = kind
        self.host = host
        self.port = port
        self.username = username
        self.password = password
    }

    /// Parses a proxy URL. A missing scheme means `http://` (as curl); a trailing `/` is allowed, any other
    /// path, query or fragment is not.
    public static func parse(_ text: String) throws(ProxyError) -> ProxyServer {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { throw ProxyError("a proxy URL must not be empty") }
        guard !trimmed.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7F }) else {
            throw ProxyError("a proxy URL must not contain spaces or control characters")
        }
        var rest = Substring(trimmed)
        var kind = Kind.http
        if let range = rest.range(of: "://") {
            let scheme = rest[..<range.lowerBound].lowercased()
            switch scheme {
            case "http": kind = .http
            case "socks5": kind = .socks5
            case "socks5h": kind = .socks5h
            case "https":
                throw ProxyError("https:// proxies (TLS to the proxy) are not supported; use http:// (https downloads "
                    + "are still encrypted end to end through its CONNECT tunnel)")
            case "socks4", "socks4a":
                throw ProxyError("\(scheme):// proxies are not supported; use socks5:// or socks5h://")
            default:
                throw ProxyError("unknown proxy scheme '\(scheme)': use http://, socks5:// or socks5h://")
            }
            rest = rest[range.upperBound...]
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains(where: { "/?#".contains($0) }) else {
            throw ProxyError("a proxy URL has no path, query or fragment (got '\(redact(trimmed))')")
        }
        var username: String?, password: String?
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let user = userinfo.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = String(user[0]).removingPercentEncoding,
                  let secret = (user.count > 1 ? String(user[1]) : "").removingPercentEncoding else {
                throw ProxyError("the proxy's user name or password has a bad percent-encoding")
            }
            guard !name.isEmpty else { throw ProxyError("the proxy's user name must not be empty") }
            guard kind == .http else {
                throw ProxyError("SOCKS proxies with a user name and password are not supported (AsyncHTTPClient's "
                    + "SOCKS5 client offers no authentication); use an http:// proxy for that")
            }
            username = name
            password = user.count > 1 ? secret : ""
        }
        let (host, port) = try hostAndPort(rest)
        return ProxyServer(kind: kind, host: host, port: port, username: username, password: password)
    }

    private static func hostAndPort(_ authority: Substring) throws(ProxyError) -> (String, Int) {
        var host: Substring, portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw ProxyError("the proxy's IPv6 address lacks its ']'") }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw ProxyError("unexpected text after the proxy's IPv6 address") }
                portText = after.dropFirst()
            }
        } else {
            if let colon = authority.lastIndex(of: ":") {
                host = authority[..<colon]
                portText = authority[authority.index(after: colon)...]
            } else {
                host = authority
            }
        }
        guard !host.isEmpty else { throw ProxyError("a proxy URL must name a host") }
        guard host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-._:".contains($0)) }) else {
            throw ProxyError("the proxy host '\(host)' is not a valid host name or address")
        }
        var port = defaultPort
        if let portText {
            guard let p = Int(portText), (1...65535).contains(p) else {
                throw ProxyError("the proxy port must be from 1 to 65535 (got '\(portText)')")
            }
            port = p
        }
        return (host.lowercased(), port)
    }

    /// The URL with the password (if any) replaced by `***`: what logs, messages and `session.list` show.
    public var description: String { url(redacted: true) }

    /// The proxy as a URL, with or without its password.
    public func url(redacted: Bool) -> String {
        var text = kind.rawValue + "://"
        if let username {
            text += Self.encode(username)
            if let password, !password.isEmpty {
                text += ":" + (redacted ? Self.redactedPassword : Self.encode(password))
            }
            text += "@"
        }
        text += host.contains(":") ? "[\(host)]" : host
        return text + ":\(port)"
    }

    /// `text` with the password of a URL-like proxy string replaced (for messages about a proxy that did not parse).
    public static func redact(_ text: String) -> String {
        guard let at = text.lastIndex(of: "@") else { return text }
        let start = text.range(of: "://").map(\.upperBound) ?? text.startIndex
        guard start <= at, let colon = text[start..<at].firstIndex(of: ":") else { return text }
        return String(text[..<text.index(after: colon)]) + redactedPassword + String(text[at...])
    }

    private static func encode(_ part: String) -> String {
        var allowed = CharacterSet.urlUserAllowed
        allowed.remove(charactersIn: ":@/?#[]%")
        return part.addingPercentEncoding(withAllowedCharacters: allowed) ?? part
    }
}

/// A proxy setting that cannot be used; `message` says why.
public struct ProxyError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
