// Which proxy a request uses: the session's, else the daemon's setting, else curl's environment variables.
import Foundation

/// The proxies for http and https URLs (nil: direct) and the hosts that skip them.
public struct ProxyRules: Sendable, Hashable {
    public var http: ProxyServer?
    public var https: ProxyServer?
    public var bypass: ProxyBypass
    /// Where the rules come from: `session`, `configuration`, `environment` or `none`.
    public var source: String
    /// Plain http goes through an HTTP proxy's `CONNECT` tunnel too (curl's `--proxytunnel`), for proxies that
    /// only tunnel; otherwise it is forwarded in absolute form (`GET http://host/path`), as every client does.
    public var tunnelsPlainHTTP = false

    /// The word for "no proxy" in a `proxy` setting.
    public static let directKeyword = "direct"
    /// Distinct proxies one uid's transfers may go through at once (the engine's clients and the queue both
    /// hold to it).
    public static let maxProxiesPerUID = 16
    public static let none = ProxyRules(http: nil, https: nil, bypass: .none, source: "none")

    public init(http: ProxyServer?, https: ProxyServer?, bypass: ProxyBypass, source: String) {
        self.http = http
        self.https = https
        self.bypass = bypass
        self.source = source
    }

    /// One proxy (nil: direct) for every scheme.
    public init(all proxy: ProxyServer?, bypass: ProxyBypass, source: String) {
        self.init(http: proxy, https: proxy, bypass: bypass, source: source)
    }

    public var isDirect: Bool { http == nil && https == nil }

    /// For people and logs, passwords redacted: "http://proxy:3128 for http and https, bypassing localhost".
    public var summary: String {
        if isDirect { return "direct" }
        var text: String
        if http == https, let proxy = http {
            text = "\(proxy) for http and https"
        } else {
            text = [("http", http), ("https", https)].map { "\($0.1.map(String.init(describing:)) ?? "direct") for \($0.0)" }
                .joined(separator: ", ")
        }
        if !bypass.isEmpty { text += ", bypassing \(bypass.all ? "every host" : bypass.text)" }
        if tunnelsPlainHTTP, http?.kind == .http { text += ", tunnelling plain http" }
        return text
    }

    /// The proxy a request to `url` goes through (chosen by the URL before redirects), nil: direct.
    public func proxy(for url: String) -> ProxyServer? {
        if isDirect { return nil }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased() else { return nil }
        let proxy: ProxyServer?
        switch scheme {
        case "http": proxy = http
        case "https": proxy = https
        default: return nil
        }
        guard let proxy else { return nil }
        if let host = components.host, bypass.matches(host: host) { return nil }
        return proxy
    }

    /// A request to `url`, going through `proxy` (`proxy(for: url)`, already chosen), is forwarded to it in absolute
    /// form: plain http to an HTTP proxy, unless `tunnelsPlainHTTP`.
    public func forwards(_ url: String, via proxy: ProxyServer?) -> Bool {
        guard !tunnelsPlainHTTP, proxy?.kind == .http else { return false }
        return url.lowercased().hasPrefix("http://")
    }

    /// A `proxy` setting's value: `direct` (nil) or a proxy URL.
    public static func setting(_ text: String) throws(ProxyError) -> ProxyServer? {
        if text.trimmingCharacters(in: .whitespaces).lowercased() == directKeyword { return nil }
        return try ProxyServer.parse(text)
    }

    /// curl's variables: `http_proxy` (lower-case only: `HTTP_PROXY` can be set by a CGI request's `Proxy:`
    /// header), `https_proxy`/`HTTPS_PROXY`, `all_proxy`/`ALL_PROXY` (for a scheme without its own) and
    /// `no_proxy`/`NO_PROXY`; lower-case wins. An empty variable is unset. A value that does not parse is left
    /// out and named in `problems`.
    public static func environment(_ env: [String: String]) -> (rules: ProxyRules, problems: [String]) {
        var problems: [String] = []
        func value(_ names: [String]) -> (name: String, text: String)? {
            for name in names { if let v = env[name], !v.trimmingCharacters(in: .whitespaces).isEmpty { return (name, v) } }
            return nil
        }
        func proxy(_ names: [String]) -> ProxyServer?? {
            guard let (name, text) = value(names) else { return .none }
            do {
                return .some(try setting(text))
            } catch {
                problems.append("$\(name) ('\(ProxyServer.redact(text))'): \(error.message); it is ignored")
                return .none
            }
        }
        let all = proxy(["all_proxy", "ALL_PROXY"])
        let http = proxy(["http_proxy"]) ?? all
        let https = proxy(["https_proxy", "HTTPS_PROXY"]) ?? all
        var bypass = ProxyBypass.none
        if let (name, text) = value(["no_proxy", "NO_PROXY"]) {
            do {
                bypass = try ProxyBypass.parse(text)
            } catch {
                problems.append("$\(name): \(error.message); it is ignored")
            }
        }
        let rules = ProxyRules(http: http ?? nil, https: https ?? nil, bypass: bypass,
                               source: http == nil && https == nil ? "none" : "environment")
        return (rules, problems)
    }

    /// The rules of a session: its own `proxy` (`direct` or a URL) when it has one, else the daemon's; its own
    /// `proxyBypass` when it has one, else the daemon's; its `proxyTunnel` when it has one. Both were checked when
    /// the session was opened.
    public func forSession(proxy: String?, bypass: String?, tunnel: Bool? = nil) -> ProxyRules {
        var rules = self
        if let proxy {
            do {
                rules = ProxyRules(all: try Self.setting(proxy), bypass: self.bypass, source: "session")
            } catch {}
        }
        if let bypass, let parsed = try? ProxyBypass.parse(bypass) { rules.bypass = parsed }
        rules.tunnelsPlainHTTP = tunnel ?? tunnelsPlainHTTP
        return rules
    }
}
