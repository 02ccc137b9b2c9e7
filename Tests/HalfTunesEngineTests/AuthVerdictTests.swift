import HalfTunesProtocol
import Testing
@testable import HalfTunesEngine

/// Every way a 401 ends, without a server: answered, or refused with `authenticationRequired` in words.
@Suite struct AuthVerdictTests {
    static let url = "http://files.example:8080/a.iso"
    static let origin = "http://files.example:8080"
    static let alice = Credentials(user: "alice", password: "pw")
    static let digest = AuthChallenge(scheme: "Digest", parameters: ["realm": "r", "nonce": "n1", "qop": "auth"])
    static let basic = AuthChallenge(scheme: "Basic", parameters: ["realm": "b"])

    static func message(_ verdict: AuthVerdict) -> String? {
        guard case .refuse(let e) = verdict else { return nil }
        #expect(e.code == TaskErrorCode.authenticationRequired && e.httpStatus == 401)
        return e.message
    }

    @Test func answeredWhenItMay() {
        #expect(AuthVerdict.decide(url: Self.url, challenges: [Self.basic, Self.digest], credentials: Self.alice,
                                   origin: Self.origin, answered: nil) == .answer(Self.digest))
        // Answered for another URL (a redirect on the same origin): answered again.
        #expect(AuthVerdict.decide(url: Self.url, challenges: [Self.digest], credentials: Self.alice, origin: Self.origin,
                                   answered: ("http://files.example:8080/old", Self.digest)) == .answer(Self.digest))
        // A stale nonce: the credentials were right, answered again with the new one.
        var stale = Self.digest
        stale.parameters["nonce"] = "n2"
        stale.parameters["stale"] = "TRUE"
        #expect(AuthVerdict.decide(url: Self.url, challenges: [stale], credentials: Self.alice, origin: Self.origin,
                                   answered: (Self.url, Self.digest)) == .answer(stale))
    }

    @Test func refusedInWords() throws {
        let none = try #require(Self.message(AuthVerdict.decide(
            url: Self.url, challenges: [Self.digest], credentials: nil, origin: Self.origin, answered: nil)))
        #expect(none == #"files.example:8080 asks for credentials (Digest realm "r"); give the session credentials (user and password)"#)
        let foreign = try #require(Self.message(AuthVerdict.decide(
            url: "http://other.example/x", challenges: [Self.basic], credentials: Self.alice, origin: Self.origin, answered: nil)))
        #expect(foreign.contains("sent only to http://files.example:8080"), "\(foreign)")
        let unsupported = try #require(Self.message(AuthVerdict.decide(
            url: Self.url, challenges: [AuthChallenge(scheme: "Negotiate")], credentials: Self.alice, origin: Self.origin,
            answered: nil)))
        #expect(unsupported.contains("asks for Negotiate, which halftunesd cannot answer"), "\(unsupported)")
        let wrong = try #require(Self.message(AuthVerdict.decide(
            url: Self.url, challenges: [Self.digest], credentials: Self.alice, origin: Self.origin, answered: (Self.url, Self.digest))))
        #expect(wrong.contains(#"refused the credentials of user 'alice' (Digest realm "r")"#), "\(wrong)")
        // A stale flag with the same nonce is no new challenge.
        var sameNonce = Self.digest
        sameNonce.parameters["stale"] = "true"
        #expect(Self.message(AuthVerdict.decide(url: Self.url, challenges: [sameNonce], credentials: Self.alice,
                                                origin: Self.origin, answered: (Self.url, Self.digest))) != nil)
        let endless = try #require(Self.message(AuthVerdict.decide(
            url: Self.url, challenges: [Self.digest], credentials: Self.alice, origin: Self.origin, answered: nil,
            answers: AuthVerdict.maxAnswers)))
        #expect(endless.contains("asked for credentials 5 times"), "\(endless)")
        let empty = try #require(Self.message(AuthVerdict.decide(
            url: Self.url, challenges: [], credentials: nil, origin: Self.origin, answered: nil)))
        #expect(empty.contains("no WWW-Authenticate challenge"))
    }
}

/// The method and body of the request a redirect leads to, as AsyncHTTPClient decides (the attempt's own hops
/// follow the same rule, from the method of the request that got the redirect).
@Suite struct HopMethodTests {
    @Test func redirectsChangeMethodsAsAsyncHTTPClientDoes() {
        typealias Hop = AttemptDelegate.Hop
        #expect(Hop.afterRedirect(303, method: "PUT", sendsBody: true) == ("GET", false))
        #expect(Hop.afterRedirect(303, method: "HEAD", sendsBody: false) == ("HEAD", false))
        #expect(Hop.afterRedirect(302, method: "POST", sendsBody: true) == ("GET", false))
        #expect(Hop.afterRedirect(301, method: "POST", sendsBody: true) == ("GET", false))
        #expect(Hop.afterRedirect(302, method: "PUT", sendsBody: true) == ("PUT", true))
        #expect(Hop.afterRedirect(307, method: "POST", sendsBody: true) == ("POST", true))
        #expect(Hop.afterRedirect(308, method: "PUT", sendsBody: true) == ("PUT", true))
        #expect(Hop.afterRedirect(302, method: "GET", sendsBody: false) == ("GET", false))
    }
}
