import HalfTunesProtocol
import Testing
@testable import HalfTunesCore

/// Every way a 401 ends, without a server: answered, or refused with `authenticationRequired` in words.
@Suite struct AuthVerdictTests {
    static let url = "http://files.example:8080/a.iso"
    static let pw = Credentials(user: "alice", password: "pw")
    static let alice = [OriginCredentials(origin: "http://files.example:8080", user: "alice", password: "pw")]
    static let digest = AuthChallenge(scheme: "Digest", parameters: ["realm": "r", "nonce": "n1", "qop": "auth"])
    static let basic = AuthChallenge(scheme: "Basic", parameters: ["realm": "b"])

    static func message(_ verdict: AuthVerdict) -> String? {
        guard case .refuse(let e) = verdict else { return nil }
        #expect(e.code == TaskErrorCode.authenticationRequired && e.httpStatus == 401)
        return e.message
    }

    @Test func answeredWhenItMay() {
        #expect(AuthVerdict.decide(url: Self.url, challenges: [Self.basic, Self.digest], credentials: Self.alice,
                                   answered: nil) == .answer(Self.digest, with: Self.pw))
        // Answered for another URL (a redirect on the same origin): answered again.
        #expect(AuthVerdict.decide(url: Self.url, challenges: [Self.digest], credentials: Self.alice,
                                   answered: ("http://files.example:8080/old", Self.digest)) == .answer(Self.digest, with: Self.pw))
        // A stale nonce: the credentials were right, answered again with the new one.
        var stale = Self.digest
        stale.parameters["nonce"] = "n2"
        stale.parameters["stale"] = "TRUE"
        #expect(AuthVerdict.decide(url: Self.url, challenges: [stale], credentials: Self.alice,
                                   answered: (Self.url, Self.digest)) == .answer(stale, with: Self.pw))
    }

    /// Each origin gets its own credentials, a realm's before the origin's for any realm; the default port is
    /// the same origin written either way.
    @Test func theCredentialsOfTheOriginAndRealmAnswer() {
        let bob = Credentials(user: "bob", password: "b")
        let carol = Credentials(user: "carol", password: "c")
        let list = [
            OriginCredentials(origin: "https://other.example", user: "x", password: "x"),
            OriginCredentials(origin: "https://files.example", user: "bob", password: "b"),
            OriginCredentials(origin: "https://files.example", realm: "r", user: "carol", password: "c"),
        ]
        #expect(AuthVerdict.decide(url: "https://files.example:443/f", challenges: [Self.basic], credentials: list,
                                   answered: nil) == .answer(Self.basic, with: bob))
        #expect(AuthVerdict.decide(url: "https://files.example/f", challenges: [Self.digest], credentials: list,
                                   answered: nil) == .answer(Self.digest, with: carol))
        // A realm's credentials only: the challenge of another realm is not answered with them.
        let realmOnly = [OriginCredentials(origin: "http://files.example:8080", realm: "r", user: "carol", password: "c")]
        #expect(AuthVerdict.decide(url: Self.url, challenges: [Self.basic, Self.digest], credentials: realmOnly,
                                   answered: nil) == .answer(Self.digest, with: carol))
        let otherRealm = Self.message(AuthVerdict.decide(url: Self.url, challenges: [Self.basic], credentials: realmOnly,
                                                         answered: nil))
        #expect(otherRealm?.contains(#"are for realm "r" only"#) == true, "\(otherRealm ?? "answered")")
    }

    /// Credentials for https are never sent to the same host over plain http, nor to another origin; an entry
    /// journaled without an origin is sent nowhere.
    @Test func nothingGoesToAnotherOrigin() throws {
        let https = [OriginCredentials(origin: "https://files.example:8080", user: "alice", password: "pw")]
        let plain = try #require(Self.message(AuthVerdict.decide(url: Self.url, challenges: [Self.basic],
                                                                 credentials: https, answered: nil)))
        #expect(plain.contains("only for https://files.example:8080, never sent to http://files.example:8080"), "\(plain)")
        let foreign = try #require(Self.message(AuthVerdict.decide(
            url: "http://other.example/x", challenges: [Self.basic], credentials: Self.alice, answered: nil)))
        #expect(foreign.contains("only for http://files.example:8080, never sent to http://other.example:80"), "\(foreign)")
        let legacy = [OriginCredentials(origin: nil, user: "alice", password: "pw")]
        #expect(Self.message(AuthVerdict.decide(url: Self.url, challenges: [Self.basic], credentials: legacy,
                                                answered: nil)) != nil)
    }

    @Test func refusedInWords() throws {
        let none = try #require(Self.message(AuthVerdict.decide(
            url: Self.url, challenges: [Self.digest], credentials: [], answered: nil)))
        #expect(none == #"files.example:8080 asks for credentials (Digest realm "r"); give the session credentials for http://files.example:8080"#)
        let unsupported = try #require(Self.message(AuthVerdict.decide(
            url: Self.url, challenges: [AuthChallenge(scheme: "Negotiate")], credentials: Self.alice, answered: nil)))
        #expect(unsupported.contains("asks for Negotiate, which halftunesd cannot answer"), "\(unsupported)")
        let wrong = try #require(Self.message(AuthVerdict.decide(
            url: Self.url, challenges: [Self.digest], credentials: Self.alice, answered: (Self.url, Self.digest))))
        #expect(wrong.contains(#"refused the credentials of user 'alice' (Digest realm "r")"#), "\(wrong)")
        // A stale flag with the same nonce is no new challenge.
        var sameNonce = Self.digest
        sameNonce.parameters["stale"] = "true"
        #expect(Self.message(AuthVerdict.decide(url: Self.url, challenges: [sameNonce], credentials: Self.alice,
                                                answered: (Self.url, Self.digest))) != nil)
        let endless = try #require(Self.message(AuthVerdict.decide(
            url: Self.url, challenges: [Self.digest], credentials: Self.alice, answered: nil,
            answers: AuthVerdict.maxAnswers)))
        #expect(endless.contains("asked for credentials 5 times"), "\(endless)")
        let empty = try #require(Self.message(AuthVerdict.decide(
            url: Self.url, challenges: [], credentials: [], answered: nil)))
        #expect(empty.contains("no WWW-Authenticate challenge"))
    }
}
