// A session's `proxy` and `proxyBypass`: checked and normalized when stored, shown without the password.
import HalfTunesCore
import HalfTunesProtocol

enum SessionProxy {
    /// The stored form of a session's `proxy`: nil or "" (the daemon's), `direct`, or the URL normalized. The
    /// form `presented` shows (password `***`) keeps the `stored` password, so a client may send back the
    /// configuration it was given.
    static func resolve(_ text: String?, stored: String?) throws(RPCError) -> String? {
        guard let text, !text.trimmingCharacters(in: .whitespaces).isEmpty else { return nil }
        if let stored, text == presented(stored) { return stored }
        do {
            return try ProxyRules.setting(text)?.url(redacted: false) ?? ProxyRules.directKeyword
        } catch {
            throw RPCError.invalidParams("configuration.proxy must be 'direct' or a proxy URL (http://[user:password@]host:port, "
                + "socks5://host:port or socks5h://host:port): \(error.message)")
        }
    }

    /// The stored form of a session's `proxyBypass` (nil: the daemon's; "" bypasses nothing).
    static func resolveBypass(_ text: String?) throws(RPCError) -> String? {
        guard let text else { return nil }
        do {
            return try ProxyBypass.parse(text).text
        } catch {
            throw RPCError.invalidParams("configuration.proxyBypass: \(error.message)")
        }
    }

    /// A stored `proxy` as clients see it: the password replaced by `***`.
    static func presented(_ stored: String?) -> String? {
        guard let stored, stored != ProxyRules.directKeyword else { return stored }
        guard let server = try? ProxyServer.parse(stored) else { return ProxyServer.redact(stored) }
        return server.description
    }
}
