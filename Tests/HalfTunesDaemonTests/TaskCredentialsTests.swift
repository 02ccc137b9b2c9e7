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
