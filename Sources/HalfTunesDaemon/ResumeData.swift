import Crypto
import Foundation
import HalfTunesCore
import HalfTunesProtocol

/// The opaque resume-data string handed to clients: base64url of a small JSON object that names a
/// single-use token in the journal, authenticated with HMAC-SHA256 under a key only the daemon knows
/// (`<state>/resume-data.key`). It never carries a file path: the token maps to kept partial data that
/// only the daemon knows where to find. Forged, altered or other users' resume data is refused.
struct ResumeData: Codable, Equatable {
    var v: Int = 2
    /// Random 128-bit token (hex), the key of a `resume_tokens` row.
    var token: String
    var url: String
    var bytes: Int64
    /// The uid owning the session the task was canceled in; only that uid may redeem it.
    var uid: UInt32
    /// base64url HMAC-SHA256 of the other fields.
    var mac: String = ""

    static let refusal = "Resume data is malformed or was not issued to you by this daemon: pass the exact string task.cancel returned"

    private var signedBytes: Data {
        Data("halftunesd-resume-data\nv\(v)\n\(token)\n\(uid)\n\(bytes)\n\(url)".utf8)
    }

    func encoded(key: SymmetricKey) -> String {
        var signed = self
        signed.mac = Base64URL.encode(Data(HMAC<SHA256>.authenticationCode(for: signedBytes, using: key)))
        let json = (try? JSONEncoder().encode(signed)) ?? Data()
        return Base64URL.encode(json)
    }

    static func decode(_ string: String, key: SymmetricKey) throws(RPCError) -> ResumeData {
        let trimmed = string.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.utf8.count < 4096, let data = Base64URL.decode(trimmed),
              let value = try? JSONDecoder().decode(ResumeData.self, from: data), value.v == 2,
              value.token.count == 32, value.token.allSatisfy(\.isHexDigit),
              let mac = Base64URL.decode(value.mac),
              HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: value.signedBytes, using: key)
        else {
            throw RPCError(.invalidResumeData, refusal)
        }
        return value
    }

    /// 128 random bits, as 32 hex digits.
    static func newToken() -> String { Hex.random(bytes: 16) }
}

/// base64url without padding (RFC 4648 §5).
enum Base64URL {
    static func encode(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decode(_ string: String) -> Data? {
        guard string.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else { return nil }
        var b64 = string.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b64.count % 4 != 0 { b64 += "=" }
        return Data(base64Encoded: b64)
    }
}
