import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// Credentials in a URL's userinfo are taken out of the URL (nothing else of it changes) into the task's.
@Suite struct TaskCredentialsTests {
    @Test func userinfoIsTakenOutOfTheURL() throws {
        #expect(TaskCredentials.split("https://alice:s3cret@files.example:8443/a/b?x=1#f")?.url
                == "https://files.example:8443/a/b?x=1#f")
        #expect(TaskCredentials.split("http://files.example/a@b") == nil, "an @ in the path is no userinfo")
        #expect(TaskCredentials.split("http://a%40b:p%3Aw@[::1]:81/x")?.userinfo == "a%40b:p%3Aw")
        #expect(TaskCredentials.split("http://u:p@[::1]:81/x")?.url == "http://[::1]:81/x")

        let p = try TaskCredentials.normalize(TaskCreateParams(session: "s", url: "http://a%40b:p%3Aw%20@h/f"))
        #expect(p.url == "http://h/f")
        #expect(p.credentials == Credentials(user: "a@b", password: "p:w "))
        let noPassword = try TaskCredentials.normalize(TaskCreateParams(session: "s", url: "http://anon@h/f"))
        #expect(noPassword.credentials == Credentials(user: "anon", password: ""))
        let plain = try TaskCredentials.normalize(TaskCreateParams(session: "s", url: "http://h/f"))
        #expect(plain.url == "http://h/f" && plain.credentials == nil)
    }

    @Test func badCredentialsAreRefused() {
        #expect(throws: RPCError.self) {
            try TaskCredentials.normalize(TaskCreateParams(session: "s", url: "http://u:p@h/f",
                                                           credentials: Credentials(user: "v", password: "q")))
        }
        #expect(throws: RPCError.self) { try TaskCredentials.normalize(TaskCreateParams(session: "s", url: "http://:p@h/f")) }
        #expect(throws: RPCError.self) {
            try TaskCredentials.normalize(TaskCreateParams(session: "s", url: "http://h/f",
                                                           credentials: Credentials(user: "a:b", password: "")))
        }
        #expect(throws: RPCError.self) { try TaskCredentials.normalize(TaskCreateParams(session: "s", url: "http://u:p%0A@h/f")) }
    }
}

/// A session's credentials name their origin, written one way; `***` keeps what is stored, an entry journaled
/// without an origin included, while a new one without an origin is refused in words that give the new form.
@Suite struct SessionCredentialsTests {
    static func message(_ body: () throws -> Void) -> String {
        do { try body() } catch let error as RPCError { return error.message } catch { return "\(error)" }
        return "accepted"
    }

    @Test func originsAreWrittenOneWay() throws {
        let resolved = try SessionCredentials.resolve([
            OriginCredentials(origin: "HTTPS://Files.Example:443/", user: "a", password: "p"),
            OriginCredentials(origin: "http://files.example:8080", realm: "r", user: "b", password: "q"),
            OriginCredentials(origin: "http://[::1]:80", user: "c", password: ""),
        ], stored: nil)
        #expect(resolved?.map(\.origin) == ["https://files.example", "http://files.example:8080", "http://[::1]"])
        #expect(try SessionCredentials.resolve([], stored: nil) == nil)
    }

    @Test func badEntriesAreRefusedInWords() {
        let noOrigin = Self.message { _ = try SessionCredentials.resolve([OriginCredentials(origin: nil, user: "a", password: "p")], stored: nil) }
        #expect(noOrigin.contains(#"names no origin"#) && noOrigin.contains(#"{"origin":"https://files.example","user":"a""#), "\(noOrigin)")
        for bad in ["ftp://h", "https://", "https://h/path", "https://u@h", "https://h?x", "h", "https://h:0", "https://h:70000"] {
            let m = Self.message { _ = try SessionCredentials.resolve([OriginCredentials(origin: bad, user: "a", password: "p")], stored: nil) }
            #expect(m.contains("must be an origin"), "\(bad): \(m)")
        }
        let twice = Self.message {
            _ = try SessionCredentials.resolve([OriginCredentials(origin: "https://h", user: "a", password: "p"),
                                                OriginCredentials(origin: "https://h:443", user: "b", password: "q")], stored: nil)
        }
        #expect(twice.contains("one entry per origin and realm"), "\(twice)")
        let many = (0...OriginCredentials.maxCount).map { OriginCredentials(origin: "https://h\($0)", user: "a", password: "p") }
        #expect(Self.message { _ = try SessionCredentials.resolve(many, stored: nil) }.contains("at most 64"))
        let realm = Self.message { _ = try SessionCredentials.resolve([OriginCredentials(origin: "https://h", realm: "a\u{0}", user: "a", password: "p")], stored: nil) }
        #expect(realm.contains("realm"), "\(realm)")
        let long = Self.message { _ = try SessionCredentials.resolve([OriginCredentials(origin: "https://h", user: "a", password: String(repeating: "p", count: 5000))], stored: nil) }
        #expect(long.contains("at most 4096"), "\(long)")
    }

    @Test func theRedactedFormKeepsWhatIsStored() throws {
        let stored = [OriginCredentials(origin: nil, user: "old", password: "1"),
                      OriginCredentials(origin: "https://h", realm: "r", user: "a", password: "2")]
        let shown = try #require(SessionCredentials.presented(stored))
        #expect(shown.allSatisfy { $0.password == Credentials.redacted })
        #expect(try SessionCredentials.resolve(shown, stored: stored) == stored)
        let otherUser = Self.message {
            _ = try SessionCredentials.resolve([OriginCredentials(origin: "https://h", realm: "r", user: "b", password: "***")], stored: stored)
        }
        #expect(otherUser.contains("has none for user 'b' at https://h"), "\(otherUser)")
    }
}
