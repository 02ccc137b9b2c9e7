import Foundation
import HalfTunesProtocol

/// The opaque resume-data string handed to clients: base64url of a small JSON object that names a
/// single-use token in the journal. It never carries a file path: the token maps to kept partial data
/// that only the daemon knows where to find.
struct ResumeData: Codable, Equatable {
    var v: Int = 1
    /// Random 128-bit token (hex), the key of a `resume_tokens` row.
    var token: String
    var url: String
    var bytes: Int64

    func encoded() -> String {
        let json = (try? JSONEncoder().encode(self)) ?? Data()
        return json.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decode(_ string: String) throws(RPCError) -> ResumeData {
        var b64 = string.trimmingCharacters(in: .whitespacesAndNewlines)
            .replacingOccurrences(of: "-", with: "+")
            .replacingOccurrences(of: "_", with: "/")
        while b64.count % 4 != 0 { b64 += "=" }
        guard string.count < 4096, let data = Data(base64Encoded: b64),
              let value = try? JSONDecoder().decode(ResumeData.self, from: data), value.v == 1,
              value.token.count == 32, value.token.allSatisfy(\.isHexDigit)
        else {
            throw RPCError(.invalidResumeData, "Resume data is malformed: pass the exact string task.cancel returned")
        }
        return value
    }

    static func newToken() -> String {
        var rng = SystemRandomNumberGenerator()
        return (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &rng)) }.joined()
    }
}
