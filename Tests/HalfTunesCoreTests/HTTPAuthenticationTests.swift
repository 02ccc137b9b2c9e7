import Foundation
import HalfTunesProtocol
import Testing
@testable import HalfTunesCore

/// `WWW-Authenticate` parsing, the choice of challenge, and Digest answers checked against RFC 7616's own examples.
@Suite struct HTTPAuthenticationTests {
    static let mufasa = Credentials(user: "Mufasa", password: "Circle of Life")

    /// RFC 7616 3.9.1: the server offers SHA-256 then MD5 in two fields.
    static let rfcChallenges = AuthChallenge.parse([
        #"Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=SHA-256, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS""#,
        #"Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=MD5, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS""#,
    ])

    @Test func rfc7616ExamplesSHA256AndMD5() throws {
        #expect(Self.rfcChallenges.count == 2)
        let sha = try #require(HTTPAuthentication.choose(Self.rfcChallenges))
        #expect(sha.parameters["algorithm"] == "SHA-256", "the strongest is chosen")
        let cnonce = "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ"
        let shaAnswer = try #require(HTTPAuthentication.authorization(
            for: sha, credentials: Self.mufasa, method: "GET", uri: "/dir/index.html", count: 1, clientNonce: cnonce))
        #expect(shaAnswer.contains(#"response="753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1""#), "\(shaAnswer)")
        #expect(shaAnswer.contains("algorithm=SHA-256") && shaAnswer.contains("qop=auth, nc=00000001"))
        #expect(shaAnswer.contains(#"opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS""#))
        let md5Answer = try #require(HTTPAuthentication.authorization(
            for: Self.rfcChallenges[1], credentials: Self.mufasa, method: "GET", uri: "/dir/index.html", count: 1,
            clientNonce: cnonce))
        #expect(md5Answer.contains(#"response="8ca523f5e9506fed4657c9700eebdbec""#), "\(md5Answer)")
    }

    /// RFC 2617 3.5 (qop=auth, MD5): the classic example (its password is "Circle Of Life").
    @Test func rfc2617Example() throws {
        let c = try #require(AuthChallenge.parse([
            #"Digest realm="testrealm@host.com", qop="auth,auth-int", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", opaque="5ccc069c403ebaf9f0171e9517f40e41""#,
        ]).first)
        let answer = try #require(HTTPAuthentication.authorization(
            for: c, credentials: Credentials(user: "Mufasa", password: "Circle Of Life"), method: "GET", uri: "/dir/index.html",
            count: 1, clientNonce: "0a4f113b"))
        #expect(answer.contains(#"response="6629fae49393a05397450978507c4ef1""#), "\(answer)")
        #expect(!answer.contains("algorithm="), "not named when the challenge named none")
    }

    /// A name that is not ASCII goes in `username*` (RFC 7616 3.4.4, RFC 8187's encoding); the hash takes its UTF-8.
    /// An `-sess` algorithm without `qop` sends the client nonce its A1 was made with (RFC 2617 3.2.2.2).
    @Test func nonASCIINamesAndSessWithoutQop() throws {
        let c = try #require(AuthChallenge.parse([#"Digest realm="r", nonce="n", algorithm=MD5-sess"#]).first)
        let answer = try #require(HTTPAuthentication.authorization(
            for: c, credentials: Credentials(user: "Jäsøn Doe", password: "Secret, or not?"), method: "GET", uri: "/",
            clientNonce: "c0"))
        #expect(answer.contains("username*=UTF-8''J%C3%A4s%C3%B8n%20Doe") && !answer.contains("username=\""), "\(answer)")
        #expect(answer.contains(#"cnonce="c0""#) && !answer.contains("qop="), "\(answer)")
        // md5(md5(md5("Jäsøn Doe:r:Secret, or not?") + ":n:c0") + ":n:" + md5("GET:/")), by Python's hashlib.
        #expect(answer.contains(#"response="859ccf509150f3fc051656a4b3dd6710""#), "\(answer)")
        let plain = try #require(HTTPAuthentication.authorization(
            for: c, credentials: Self.mufasa, method: "GET", uri: "/", clientNonce: "c0"))
        #expect(plain.contains(#"username="Mufasa""#))
    }

    @Test func parsingIsTolerant() {
        let parsed = AuthChallenge.parse([
            #"Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple""#,
            "Basic dXNlcjpwYXNz==",
            "Bearer",
        ])
        #expect(parsed.map(\.scheme) == ["newauth", "basic", "basic", "bearer"])
        #expect(parsed[0].parameters == ["realm": "apps", "type": "1", "title": #"Login to "apps""#])
        #expect(parsed[1].realm == "simple")
        #expect(parsed[1].summary == #"Basic realm "simple""#)
    }

    @Test func theChoice() {
        let basic = AuthChallenge(scheme: "Basic", parameters: ["realm": "r"])
        let md5 = AuthChallenge(scheme: "Digest", parameters: ["realm": "r", "nonce": "n"])
        let intOnly = AuthChallenge(scheme: "Digest", parameters: ["realm": "r", "nonce": "n", "qop": "auth-int"])
        let unknownAlgorithm = AuthChallenge(scheme: "Digest", parameters: ["nonce": "n", "algorithm": "SHA-512-256"])
        #expect(HTTPAuthentication.choose([basic, md5]) == md5)
        #expect(HTTPAuthentication.choose([intOnly, basic]) == basic, "auth-int only is not answered")
        #expect(HTTPAuthentication.choose([unknownAlgorithm]) == nil)
        #expect(HTTPAuthentication.choose([AuthChallenge(scheme: "Negotiate")]) == nil)
        #expect(HTTPAuthentication.basic(Credentials(user: "Aladdin", password: "open sesame")) == "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==")
    }

    @Test func originsAndTargets() {
        #expect(HTTPAuthentication.origin("http://Example.org/a") == "http://example.org:80")
        #expect(HTTPAuthentication.origin("https://example.org:8443/a") == "https://example.org:8443")
        #expect(HTTPAuthentication.origin("http://[::1]:81/") == "http://[::1]:81")
        #expect(HTTPAuthentication.requestTarget("http://h/dir/index.html?x=1&y=%20") == "/dir/index.html?x=1&y=%20")
        #expect(HTTPAuthentication.requestTarget("http://h") == "/")
    }
}

