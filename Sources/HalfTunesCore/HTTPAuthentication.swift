// Answering a server's 401: parsing `WWW-Authenticate`, Basic (RFC 7617) and Digest (RFC 7616) credentials.
import Crypto
import Foundation
import HalfTunesProtocol

/// One challenge of a `WWW-Authenticate` field (RFC 9110 11.6.1): its scheme, lower-cased, and its parameters
/// (names lower-cased, quoted values unquoted).
public struct AuthChallenge: Sendable, Equatable {
    public var scheme: String
    public var parameters: [String: String]
    /// The scheme as the server spelled it, for messages.
    public var spelling: String

    public init(scheme: String, parameters: [String: String] = [:]) {
        self.scheme = scheme.lowercased()
        self.parameters = parameters
        self.spelling = scheme
    }

    public var realm: String? { parameters["realm"] }

    /// "Digest realm \"x\"", for messages.
    public var summary: String {
        let name = scheme == "digest" ? "Digest" : scheme == "basic" ? "Basic" : spelling
        return realm.map { "\(name) realm \"\($0)\"" } ?? name
    }

    /// Every challenge of the fields' values, in order. Tolerant: a part it cannot read is skipped.
    public static func parse(_ values: [String]) -> [AuthChallenge] {
        values.flatMap { parseOne($0) }
    }

    private static func parseOne(_ value: String) -> [AuthChallenge] {
        var challenges: [AuthChallenge] = []
        var scanner = Scanner(Array(value.utf8))
        while true {
            scanner.skip { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: ",") }
            guard let scheme = scanner.token(), !scheme.isEmpty else { break }
            var challenge = AuthChallenge(scheme: scheme)
            // auth-params (name=value, comma-separated) until the next challenge's scheme (a token not followed by
            // '='), or a token68 (Basic's old form), which is skipped.
            while true {
                let mark = scanner.position
                scanner.skip { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: ",") }
                guard let name = scanner.token(), !name.isEmpty else { break }
                scanner.skip { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
                guard scanner.take(UInt8(ascii: "=")) else {
                    scanner.position = mark // the next challenge's scheme
                    break
                }
                if scanner.peek == UInt8(ascii: "=") { // token68 padding ("abc==")
                    scanner.skip { $0 == UInt8(ascii: "=") }
                    continue
                }
                scanner.skip { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
                let value = scanner.peek == UInt8(ascii: "\"") ? scanner.quoted() : scanner.token()
                challenge.parameters[name.lowercased()] = value ?? ""
            }
            challenges.append(challenge)
        }
        return challenges
    }

    private struct Scanner {
        let bytes: [UInt8]
        var position = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var peek: UInt8? { position < bytes.count ? bytes[position] : nil }

        mutating func skip(_ predicate: (UInt8) -> Bool) {
            while let b = peek, predicate(b) { position += 1 }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            guard peek == byte else { return false }
            position += 1
            return true
        }

        /// An RFC 9110 token (tchar), or nil at its absence.
        mutating func token() -> String? {
            let start = position
            while let b = peek, Self.isTChar(b) { position += 1 }
            return position > start ? String(decoding: bytes[start..<position], as: UTF8.self) : nil
        }

        /// A quoted-string, unescaped (the opening quote is next).
        mutating func quoted() -> String {
            position += 1
            var out: [UInt8] = []
            while let b = peek {
                position += 1
                if b == UInt8(ascii: "\"") { break }
                if b == UInt8(ascii: "\\"), let next = peek {
                    position += 1
                    out.append(next)
                } else {
                    out.append(b)
                }
            }
            return String(decoding: out, as: UTF8.self)
        }

        static func isTChar(_ b: UInt8) -> Bool {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"):
                return true
            default:
                return "!#$%&'*+-.^_`|~/".utf8.contains(b) // '/' too: token68 (Basic's old form)
            }
        }
    }
}

/// How a 401 is answered: which challenge, and the `Authorization` value for a request.
public enum HTTPAuthentication {
    /// The challenge to answer among those offered: Digest with SHA-256, then Digest with MD5, then Basic (the
    /// strongest first, as curl's `--anyauth`); nil when none is one halftunesd answers.
    public static func choose(_ challenges: [AuthChallenge]) -> AuthChallenge? {
        let digests = challenges.filter { $0.scheme == "digest" && $0.parameters["nonce"] != nil && DigestAlgorithm($0) != nil
            && qopUsable($0) }
        if let sha = digests.first(where: { DigestAlgorithm($0)?.hash == .sha256 }) { return sha }
        if let md5 = digests.first { return md5 }
        return challenges.first { $0.scheme == "basic" }
    }

    /// `qop` absent (RFC 2069) or offering `auth`.
    static func qopUsable(_ c: AuthChallenge) -> Bool {
        guard let qop = c.parameters["qop"] else { return true }
        return qop.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces).lowercased() == "auth" }
    }

    /// `Basic base64(user:password)` (RFC 7617, UTF-8).
    public static func basic(_ credentials: Credentials) -> String {
        "Basic " + Data("\(credentials.user):\(credentials.password)".utf8).base64EncodedString()
    }

    /// A fresh client nonce: 16 random bytes, hex.
    public static func newClientNonce() -> String { Hex.random(bytes: 16) }

    /// The `Authorization` value answering `challenge` for `method` on `uri` (the request target: path and query);
    /// `count` is the nonce count (1 for the first use of the nonce). nil for a challenge `choose` would not take.
    public static func authorization(for challenge: AuthChallenge, credentials: Credentials, method: String, uri: String,
                                     count: Int = 1, clientNonce: String = newClientNonce()) -> String? {
        switch challenge.scheme {
        case "basic":
            return basic(credentials)
        case "digest":
            guard let algorithm = DigestAlgorithm(challenge), let nonce = challenge.parameters["nonce"],
                  qopUsable(challenge) else { return nil }
            let realm = challenge.realm ?? ""
            var ha1 = algorithm.hex("\(credentials.user):\(realm):\(credentials.password)")
            if algorithm.session { ha1 = algorithm.hex("\(ha1):\(nonce):\(clientNonce)") }
            let ha2 = algorithm.hex("\(method):\(uri)")
            let nc = String(format: "%08x", count)
            let usesQop = challenge.parameters["qop"] != nil
            let response = usesQop
                ? algorithm.hex("\(ha1):\(nonce):\(nc):\(clientNonce):auth:\(ha2)")
                : algorithm.hex("\(ha1):\(nonce):\(ha2)")
            var fields = [
                username(credentials.user), "realm=\(quoted(realm))", "nonce=\(quoted(nonce))", "uri=\(quoted(uri))",
            ]
            if challenge.parameters["algorithm"] != nil { fields.append("algorithm=\(algorithm.name)") }
            if usesQop {
                fields += ["qop=auth", "nc=\(nc)", "cnonce=\(quoted(clientNonce))"]
            } else if algorithm.session {
                fields.append("cnonce=\(quoted(clientNonce))") // RFC 2617's -sess A1 needs it, qop or not (as curl)
            }
            fields.append("response=\(quoted(response))")
            if let opaque = challenge.parameters["opaque"] { fields.append("opaque=\(quoted(opaque))") }
            return "Digest " + fields.joined(separator: ", ")
        default:
            return nil
        }
    }

    /// `username="…"`, or for a name that is not ASCII `username*=UTF-8''…` (RFC 7616 3.4.4, RFC 8187).
    static func username(_ user: String) -> String {
        guard user.unicodeScalars.contains(where: { !$0.isASCII }) else { return "username=\(quoted(user))" }
        let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#$&+-.^_`|~".utf8)
        let encoded = user.utf8.map { unreserved.contains($0) ? String(UnicodeScalar($0)) : String(format: "%%%02X", $0) }
        return "username*=UTF-8''" + encoded.joined()
    }

    private static func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    /// The request target of `url` for Digest's `uri`: its path (at least "/") and query.
    public static func requestTarget(_ url: String) -> String {
        guard let c = URLComponents(string: url) else { return "/" }
        let path = c.percentEncodedPath.isEmpty ? "/" : c.percentEncodedPath
        return c.percentEncodedQuery.map { "\(path)?\($0)" } ?? path
    }

    /// "http://host:port" of `url` (the default port spelled out), lower-cased: where credentials may be sent.
    public static func origin(_ url: String) -> String? {
        guard let c = URLComponents(string: url), let scheme = c.scheme?.lowercased(), let host = c.host?.lowercased()
        else { return nil }
        let port = c.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(host):\(port)"
    }
}

/// A Digest `algorithm` (RFC 7616 3.3): MD5 (the default) or SHA-256, each with its `-sess` variant.
struct DigestAlgorithm {
    enum Hash { case md5, sha256 }
    var hash: Hash
    var session: Bool

    init?(_ challenge: AuthChallenge) {
        switch (challenge.parameters["algorithm"] ?? "MD5").uppercased() {
        case "MD5": (hash, session) = (.md5, false)
        case "MD5-SESS": (hash, session) = (.md5, true)
        case "SHA-256": (hash, session) = (.sha256, false)
        case "SHA-256-SESS": (hash, session) = (.sha256, true)
        default: return nil
        }
    }

    var name: String { (hash == .md5 ? "MD5" : "SHA-256") + (session ? "-sess" : "") }

    func hex(_ text: String) -> String {
        let data = Data(text.utf8)
        switch hash {
        case .md5: return Hex.string(Insecure.MD5.hash(data: data))
        case .sha256: return Hex.string(SHA256.hash(data: data))
        }
    }
}
