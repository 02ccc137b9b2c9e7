// Credentials for servers that ask: a session's and a task's, checked when stored, never shown whole.
import HalfTunesProtocol

enum SessionCredentials {
    /// The stored form of a session's credentials: each names its origin (normalized: `scheme://host[:port]`, the
    /// port only when not the scheme's own) and, when given, its realm. A password `***` (the form `presented` shows)
    /// keeps the stored password of the same origin, realm and user, so a client may send back the configuration
    /// it was given; so is an entry journaled without an origin kept as it was (sent nowhere), while a new one is
    /// refused with the form to use.
    static func resolve(_ given: [OriginCredentials]?, stored: [OriginCredentials]?) throws(RPCError)
        -> [OriginCredentials]? {
        guard let given, !given.isEmpty else { return nil }
        guard given.count <= OriginCredentials.maxCount else {
            throw RPCError.invalidParams("configuration.credentials holds at most \(OriginCredentials.maxCount) entries "
                + "(got \(given.count))")
        }
        var resolved: [OriginCredentials] = []
        for (index, var entry) in given.enumerated() {
            let field = "configuration.credentials[\(index)]"
            try check(entry.credentials, field: field)
            if let text = entry.origin {
                entry.origin = try origin(text, field: field + ".origin")
            } else if entry.password != Credentials.redacted {
                throw RPCError.invalidParams("\(field) names no origin: session credentials are sent only to the origin "
                    + "they name, e.g. {\"origin\":\"https://files.example\",\"user\":\"\(entry.user)\",\"password\":\"…\"} "
                    + "(with \"realm\" to answer one realm only)")
            }
            if entry.password == Credentials.redacted {
                // Kept as stored: an entry journaled without an origin too (still sent nowhere).
                guard let kept = stored?.first(where: { $0.origin == entry.origin && $0.realm == entry.realm
                    && $0.user == entry.user }) else {
                    throw RPCError.invalidParams("\(field).password '***' keeps a stored password, but this session "
                        + "has none for user '\(entry.user)' at \(entry.origin ?? "no origin"); send the password itself")
                }
                entry.password = kept.password
            }
            if let realm = entry.realm {
                guard !realm.isEmpty, realm.utf8.count <= 1024,
                      !realm.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                    throw RPCError.invalidParams("\(field).realm must be 1–1024 bytes without control characters")
                }
            }
            if resolved.contains(where: { $0.origin == entry.origin && $0.realm == entry.realm }) {
                throw RPCError.invalidParams("\(field): the session has credentials for \(entry.origin ?? "no origin")"
                    + (entry.realm.map { " realm \"\($0)\"" } ?? "") + " already; give one entry per origin and realm")
            }
            resolved.append(entry)
        }
        return resolved
    }

    static func origin(_ text: String, field: String) throws(RPCError) -> String {
        guard let origin = OriginCredentials.normalizedOrigin(text) else {
            throw RPCError.invalidParams("\(field) must be an origin: http:// or https://, a host and an optional "
                + "port, e.g. https://files.example or http://192.0.2.7:8080 (got '\(text.prefix(200))')")
        }
        return origin
    }

    /// As clients see them: each password replaced by `***`.
    static func presented(_ stored: [OriginCredentials]?) -> [OriginCredentials]? {
        stored.map { $0.map { var c = $0; c.password = Credentials.redacted; return c } }
    }
}

extension SessionCredentials {
    /// A user name Basic can carry (non-empty, no ':'), and nothing that could end a header line.
    static func check(_ c: Credentials, field: String) throws(RPCError) {
        guard !c.user.isEmpty, !c.user.contains(":") else {
            throw RPCError.invalidParams("\(field).user must be a non-empty name without ':' (Basic authentication "
                + "cannot carry one)")
        }
        guard c.user.utf8.count <= 1024, c.password.utf8.count <= 4096 else {
            throw RPCError.invalidParams("\(field): a user name is at most 1024 bytes, a password at most 4096")
        }
        guard !(c.user + c.password).unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw RPCError.invalidParams("\(field) must not contain control characters")
        }
    }
}

enum TaskCredentials {
    /// The request with the credentials of its URL's userinfo (`scheme://user:password@host/…`, percent-decoded)
    /// taken out of the URL and into `credentials`, which are checked: a URL keeps no password, so none is ever
    /// journaled with it, shown or logged.
    static func normalize(_ p: TaskCreateParams) throws(RPCError) -> TaskCreateParams {
        var p = p
        if let url = p.url, let (stripped, userinfo) = split(url) {
            guard p.credentials == nil else {
                throw RPCError.invalidParams("give credentials in the URL or in 'credentials', not both")
            }
            let parts = userinfo.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard let user = parts[0].removingPercentEncoding,
                  let password = (parts.count > 1 ? String(parts[1]) : "").removingPercentEncoding else {
                throw RPCError.invalidParams("the URL's user or password is not valid percent-encoding")
            }
            p.url = stripped
            p.credentials = Credentials(user: user, password: password)
        }
        if let c = p.credentials { try SessionCredentials.check(c, field: "credentials") }
        return p
    }

    /// The URL without its userinfo, and the userinfo as written; nil when it has none.
    static func split(_ url: String) -> (url: String, userinfo: String)? {
        guard let scheme = url.range(of: "://") else { return nil }
        let rest = url[scheme.upperBound...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard let at = authority.lastIndex(of: "@") else { return nil }
        return (String(url[..<scheme.upperBound]) + authority[authority.index(after: at)...] + rest[authorityEnd...],
                String(authority[..<at]))
    }
}
