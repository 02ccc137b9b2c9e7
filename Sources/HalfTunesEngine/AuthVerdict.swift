// What an attempt does with a 401: answer one challenge with the task's credentials, or fail saying why.
import HalfTunesProtocol

/// The decision on a `401` (a pure function of the response, the credentials and what was sent), so every case
/// is tested without a server: answer a challenge (the request is made again with `Authorization`), or fail the
/// task with `authenticationRequired` in words that name the scheme and realm.
public enum AuthVerdict: Equatable, Sendable {
    case answer(AuthChallenge)
    case refuse(TaskError)

    /// Challenges one attempt answers at most.
    public static let maxAnswers = 4

    /// - Parameters:
    ///   - url: the URL that answered 401.
    ///   - origin: where the credentials may be sent (the task URL's scheme, host and port).
    ///   - answered: the URL and challenge this request's `Authorization` answered, if it sent one.
    ///   - answers: how many challenges the attempt answered already (at most `maxAnswers`: a server that keeps
    ///     asking, e.g. with ever new stale nonces, is not answered forever).
    public static func decide(url: String, challenges: [AuthChallenge], credentials: Credentials?, origin: String?,
                              answered: (url: String, challenge: AuthChallenge)?, answers: Int = 0) -> AuthVerdict {
        let host = ErrorMapping.hostDescription(url)
        let offered = challenges.isEmpty ? "no WWW-Authenticate challenge" : challenges.map(\.summary).joined(separator: ", ")
        func refuse(_ message: String) -> AuthVerdict {
            .refuse(TaskError(code: TaskErrorCode.authenticationRequired, message: message, httpStatus: 401))
        }
        guard let credentials else {
            return refuse("\(host) asks for credentials (\(offered)); give the session credentials (user and password)")
        }
        guard let origin, HTTPAuthentication.origin(url) == origin else {
            return refuse("\(host) asks for credentials (\(offered)), but the session's credentials are sent only to "
                + "\(origin ?? "the task's URL"), the host of the task's URL")
        }
        guard let chosen = HTTPAuthentication.choose(challenges) else {
            return refuse("\(host) asks for \(offered), which halftunesd cannot answer (it answers Basic, and Digest with "
                + "MD5 or SHA-256 and qop auth)")
        }
        guard answers < maxAnswers else {
            return refuse("\(host) asked for credentials \(answers + 1) times in one attempt (\(chosen.summary)); "
                + "the last answers were refused")
        }
        if let answered, answered.url == url {
            // Sent already: only a Digest nonce that went stale (the credentials were right) is answered again.
            let stale = chosen.scheme == "digest" && chosen.parameters["stale"]?.lowercased() == "true"
                && chosen.parameters["nonce"] != answered.challenge.parameters["nonce"]
            guard stale else {
                return refuse("\(host) refused the credentials of user '\(credentials.user)' (\(chosen.summary))")
            }
        }
        return .answer(chosen)
    }
}
