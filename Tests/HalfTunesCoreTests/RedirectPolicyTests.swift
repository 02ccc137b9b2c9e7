// Unit tests: which redirects are followed (hops, loops, schemes, https→http downgrades).
import HalfTunesCore
import HalfTunesProtocol
import Testing

@Suite("Redirect policy")
struct RedirectPolicyTests {
    typealias P = RedirectPolicy

    func code(_ verdict: P.Verdict) -> String? {
        if case .refuse(let error) = verdict { return error.code }
        return nil
    }

    @Test func redirectStatusesWithALocationAreFollowedRelativeOrAbsolute() {
        let from = "http://a.test:8080/dir/file?x=1"
        for status in [301, 302, 303, 307, 308] {
            #expect(P.evaluate(from: from, status: status, location: "/other", visited: [from], allowInsecure: false)
                == .follow("http://a.test:8080/other"))
        }
        #expect(P.evaluate(from: from, status: 302, location: "next.bin", visited: [from], allowInsecure: false)
            == .follow("http://a.test:8080/dir/next.bin"))
        #expect(P.evaluate(from: from, status: 302, location: " https://b.test/y ", visited: [from], allowInsecure: false)
            == .follow("https://b.test/y"))
        #expect(P.evaluate(from: from, status: 302, location: "//c.test/z", visited: [from], allowInsecure: false)
            == .follow("http://c.test/z"))
        // Not redirects: other statuses, or no Location.
        #expect(P.evaluate(from: from, status: 200, location: "/x", visited: [from], allowInsecure: false) == .notARedirect)
        #expect(P.evaluate(from: from, status: 404, location: "/x", visited: [from], allowInsecure: false) == .notARedirect)
        #expect(P.evaluate(from: from, status: 302, location: nil, visited: [from], allowInsecure: false) == .notARedirect)
    }

    @Test func httpsToHttpIsRefusedUnlessAllowed() {
        let from = "https://secure.test/file.iso"
        let refused = P.evaluate(from: from, status: 301, location: "http://plain.test/file.iso", visited: [from],
                                 allowInsecure: false)
        #expect(code(refused) == TaskErrorCode.redirectRefused)
        if case .refuse(let error) = refused {
            #expect(error.message.contains("https to http"))
            #expect(error.message.contains("allowInsecureRedirects"))
            #expect(error.message.contains("http://plain.test/file.iso"))
        }
        #expect(P.evaluate(from: from, status: 301, location: "http://plain.test/file.iso", visited: [from],
                           allowInsecure: true) == .follow("http://plain.test/file.iso"))
        // Upgrades and same-scheme hops need no permission; a relative Location keeps https.
        #expect(P.evaluate(from: "http://p.test/a", status: 302, location: "https://s.test/a", visited: [], allowInsecure: false)
            == .follow("https://s.test/a"))
        #expect(P.evaluate(from: from, status: 302, location: "/b", visited: [from], allowInsecure: false)
            == .follow("https://secure.test/b"))
        #expect(code(P.evaluate(from: "HTTPS://secure.test/a", status: 302, location: "HTTP://plain.test/a", visited: [],
                                allowInsecure: false)) == TaskErrorCode.redirectRefused)
    }

    @Test func otherSchemesAndGarbageAreRefused() {
        let from = "http://a.test/x"
        for location in ["ftp://a.test/x", "file:///etc/passwd", "javascript:alert(1)", "data:text/plain,hi"] {
            let verdict = P.evaluate(from: from, status: 302, location: location, visited: [from], allowInsecure: true)
            #expect(code(verdict) == TaskErrorCode.redirectRefused, "\(location)")
        }
        if case .refuse(let error) = P.evaluate(from: from, status: 302, location: "ftp://a.test/x", visited: [from],
                                                allowInsecure: false) {
            #expect(error.message == "Refused a redirect from http://a.test/x to ftp://a.test/x: only http and https URLs are followed")
        }
    }

    @Test func tenHopsAreFollowedTheEleventhIsTooMany() {
        var visited = ["http://h.test/0"]
        for hop in 1...10 {
            let verdict = P.evaluate(from: visited.last!, status: 302, location: "/\(hop)", visited: visited,
                                     allowInsecure: false)
            #expect(verdict == .follow("http://h.test/\(hop)"), "hop \(hop)")
            visited.append("http://h.test/\(hop)")
        }
        let eleventh = P.evaluate(from: visited.last!, status: 302, location: "/11", visited: visited, allowInsecure: false)
        #expect(code(eleventh) == TaskErrorCode.tooManyRedirects)
        if case .refuse(let error) = eleventh {
            #expect(error.message == "Too many redirects (more than 10) starting from http://h.test/0")
        }
    }

    @Test func loopsAreDetectedAtTheFirstRepeat() {
        let visited = ["http://h.test/a", "http://h.test/b", "http://h.test/c"]
        let loop = P.evaluate(from: "http://h.test/c", status: 307, location: "/a", visited: visited, allowInsecure: false)
        #expect(code(loop) == TaskErrorCode.tooManyRedirects)
        if case .refuse(let error) = loop {
            #expect(error.message == "Redirect loop: http://h.test/a → http://h.test/b → http://h.test/c → http://h.test/a")
        }
        let selfLoop = P.evaluate(from: "http://h.test/a", status: 302, location: "http://h.test/a",
                                  visited: ["http://h.test/a"], allowInsecure: false)
        #expect(code(selfLoop) == TaskErrorCode.tooManyRedirects)
    }
}
