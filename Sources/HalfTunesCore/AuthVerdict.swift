// What an attempt does with a 401: answer one challenge with the credentials for its origin, or fail saying why.
import HalfTunesProtocol

/// The decision on a `401` (a pure function of the response, the credentials and what was sent), so every case
/// is tested without a server: answer a challenge (the request is made again with `Authorization`), or fail the
/// task with `authenticationRequired` in words that name the scheme and realm.
public enum AuthVerdict: Equatable, Sendable {
    case answer(AuthChallenge, with: Credentials)
    case refuse(TaskError)

    /// Challenges one attempt answers at most.
    public static let maxAnswers = 4

    /// - Parameters:
    ///   - url: the URL that answered 401.
    ///   - credentials: the task's, each for its origin (and realm): only those for `url`'s origin may answer.
    ///   - answered: the URL and challenge this request's `Authorization` answered, if it sent one.
    ///   - answers: how many challenges the attempt answered already (at most `maxAnswers`: a server that keeps
    ///     asking, e.g. with ever new stale nonces, is not answered forever).
    public static func decide(url: String, challenges: [AuthChallenge], credentials: [OriginCredentials],
                              answered: (url: String, challenge: AuthChallenge)?, answers: Int = 0) -> AuthVerdict {
        let host = URLText.hostDescription(url)
        let offered = challenges.isEmpty ? "no WWW-Authenticate challenge" : challenges.map(\.summary).joined(separator: ", ")
        func refuse(_ message: String) -> AuthVerdict {
            .refuse(TaskError(code: TaskErrorCode.authenticationRequired, message: message, httpStatus: 401))
        }
        let origin = HTTPAuthentication.origin(url)
        let mine = credentials.filter { entry in
            guard let origin, let named = entry.origin else { return false }
            return HTTPAuthentication.origin(named) == origin
        }
        guard !mine.isEmpty else {
            let elsewhere = Set(credentials.compactMap(\.origin)).sorted()
            return refuse("\(host) asks for credentials (\(offered)); "
                + (elsewhere.isEmpty ? "give the session credentials for \(Self.shown(origin))"
                   : "the task's credentials are only for \(elsewhere.joined(separator: ", ")), never sent to "
                   + "\(Self.shown(origin)); give the session credentials for it"))
        }
        // A challenge is answered only by credentials for its realm, or by those for any realm of the origin.
        func answering(_ challenge: AuthChallenge) -> Credentials? {
            let forRealm = mine.first { entry in entry.realm != nil && entry.realm == challenge.realm }
            let forAny = mine.first { entry in entry.realm == nil }
            return (forRealm ?? forAny)?.credentials
        }
        let answerable = challenges.filter { answering($0) != nil }
        guard !answerable.isEmpty else {
            let realms = mine.compactMap(\.realm).map { "\"\($0)\"" }.joined(separator: ", ")
            return refuse("\(host) asks for credentials (\(offered)), but the task's credentials for \(Self.shown(origin)) "
                + "are for realm \(realms) only")
        }
        guard let chosen = HTTPAuthentication.choose(answerable), let with = answering(chosen) else {
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
                return refuse("\(host) refused the credentials of user '\(with.user)' (\(chosen.summary))")
            }
        }
        return .answer(chosen, with: with)
    }

    /// An origin as `HTTPAuthentication.origin` writes it, for messages.
    private static func shown(_ origin: String?) -> String { origin ?? "the server" }
}
