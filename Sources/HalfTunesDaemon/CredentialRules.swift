// Credentials for servers that ask: a session's and a task's, checked when stored, never shown whole.
import HalfTunesProtocol

enum SessionCredentials {
    /// The stored form: the user and password as given, or, when the password is `***` (the form `presented` shows)
    /// and the user is the stored one, the stored password, so a client may send back the configuration it was given.
    static func resolve(_ given: Credentials?, stored: Credentials?) throws(RPCError) -> Credentials? {
        guard var given else { return nil }
        try check(given, field: "configuration.credentials")
        if given.password == Credentials.redacted {
            guard let stored, stored.user == given.user else {
                throw RPCError.invalidParams("configuration.credentials.password '***' keeps a stored password, but this "
                    + "session has none for user '\(given.user)'; send the password itself")
            }
            given.password = stored.password
        }
        return given
    }

    /// As clients see them: the password replaced by `***`.
    static func presented(_ stored: Credentials?) -> Credentials? {
        stored.map { Credentials(user: $0.user, password: Credentials.redacted) }
    }
}

extension SessionCredentials {
    /// A user name Basic can carry (non-empty, no ':'), and nothing that could end a header line.
    static func check(_ c: Credentials, field: String) throws(RPCError) {
        guard !c.user.isEmpty, !c.user.contains(":") else {
            throw RPCError.invalidParams("\(field).user must be a non-empty name without ':' (Basic authentication "
                + "cannot carry one)")
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
