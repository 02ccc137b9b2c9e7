// HTTP authentication through the real binaries and a real apache2 (mod_auth_basic, mod_auth_digest).
import Crypto
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("HTTP authentication", .serialized)
struct AuthenticationTests {
    static let alice = Credentials(user: "alice", password: "s3cret-29")

    /// alice's credentials for the servers of `url`'s origin, as a session holds them.
    static func alice(at url: String, password: String = alice.password) -> [OriginCredentials] {
        [OriginCredentials(origin: url, user: alice.user, password: password)]
    }

    /// apache2 with `/basic` (Basic) and `/digest` (Digest, MD5, qop auth) for alice, every response paced (4 MiB/s)
    /// so a download is split; the files of `home`.
    static func apache(home: TempDir) throws -> ProxyProcess {
        let digestHA1 = Insecure.MD5.hash(data: Data("alice:digest realm:\(alice.password)".utf8))
            .map { String(format: "%02x", $0) }.joined()
        let sha1 = Data(Insecure.SHA1.hash(data: Data(alice.password.utf8))).base64EncodedString()
        try "alice:digest realm:\(digestHA1)\n".write(toFile: home.path + "/.htdigest", atomically: true, encoding: .utf8)
        try "alice:{SHA}\(sha1)\n".write(toFile: home.path + "/.htpasswd", atomically: true, encoding: .utf8)
        for name in [".htdigest", ".htpasswd"] { _ = chmod(home.path + "/" + name, 0o644) }
        return try ProxyProcess.apache(home: home.path, modules: ["ratelimit", "env"], directives: """
            SetOutputFilter RATE_LIMIT
            SetEnv rate-limit 4096
            <Location /basic>
              AuthType Basic
              AuthName "basic realm"
              AuthUserFile \(home.path)/.htpasswd
              Require valid-user
            </Location>
            <Location /digest>
              AuthType Digest
              AuthName "digest realm"
              AuthDigestDomain /digest/
              AuthUserFile \(home.path)/.htdigest
              Require valid-user
            </Location>
            """)
    }

    static func put(_ body: [UInt8], at path: String, in home: TempDir) throws {
        let full = home.path + path
        try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        // An hour old: apache makes the validators of a file modified within the last second weak (and then
        // answers every Range with 200).
        _ = FileManager.default.createFile(atPath: full, contents: Data(body), attributes: [
            .posixPermissions: 0o644, .modificationDate: Date().addingTimeInterval(-3600),
        ])
    }

    /// The session's credentials answer apache's Digest challenge (MD5, qop auth): a split download (every further
    /// request authenticated at once), kill -9 mid-transfer and a resume (challenged again, then Range + If-Range),
    /// pause/resume; Basic the same way; a data task too. The password is never shown: `***`, and sending `***`
    /// back keeps it.
    @Test func digestAndBasicThroughApache() async throws {
        let home = try TempDir()
        let body = TestOrigin.randomBytes(count: 24 * MiB, seed: 2910)
        let small = TestOrigin.randomBytes(count: 300_000, seed: 2911)
        try Self.put(body, at: "/digest/big.bin", in: home)
        try Self.put(small, at: "/basic/small.bin", in: home)
        let apache = try Self.apache(home: home)
        defer { apache.stop() }
        try await withDaemon { daemon, _ in
            var client = try daemon.client()
            let opened = try client.openSession("auth", configuration: SessionConfiguration(credentials: Self.alice(at: apache.url())))
            #expect(opened.session.configuration.credentials == Self.alice(at: apache.url(), password: "***"))
            let listed = try ctl(["session", "list"], socket: daemon.socketPath)
            #expect(!listed.stdout.contains(Self.alice.password) && !daemon.log().contains(Self.alice.password))
            // The configuration as shown, sent back, keeps the password.
            _ = try client.openSession("auth", configuration: opened.session.configuration)

            let t = try client.startDownload(apache.url() + "/digest/big.bin", session: "auth", destination: "big.bin")
            try SegmentedTests.waitUntilSplit(client, t.id, durable: Int64(4 * MiB))
            daemon.kill9()
            try daemon.restart()
            client = try daemon.client()
            try eventually("more received after the restart") {
                try client.task(t.id).bytesDurable > Int64(8 * MiB) ? true : nil
            }
            _ = try client.suspend(t.id)
            _ = try client.resume(t.id)
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let lines = apache.log().split(separator: "\n").filter { $0.contains("/digest/big.bin") }
            #expect(lines.contains { $0.hasPrefix("GET /digest/big.bin 401") && $0.hasSuffix("auth=-") },
                    "each attempt is challenged first: \(lines)")
            let ranged = lines.filter { $0.contains(" range=bytes") && !$0.contains(" 401 ") }
            #expect(ranged.allSatisfy { $0.contains(" 206 ") }, "every Range answered with 206 (Range + If-Range): \(lines)")
            #expect(!ranged.isEmpty && ranged.allSatisfy { $0.contains(#"auth=Digest username=\"alice\""#) }, "\(lines.joined(separator: "\n"))")
            #expect(lines.contains { $0.contains(" 206 ") && $0.contains("nc=00000002") }, "further requests count on: \(lines)")

            let basic = try client.startDownload(apache.url() + "/basic/small.bin", session: "auth", destination: "small.bin")
            let basicDone = try client.waitFor(task: basic.id, state: .completed)
            #expect(try sha256(ofFile: basicDone.location!) == TestOrigin.sha256Hex(small))
            #expect(apache.log().contains("GET /basic/small.bin 200 range=- auth=Basic "), "\(apache.log())")

            let events = try EventRecorder(client: client, session: "auth", after: try client.openSession("auth").session.lastEventSeq)
            let data = try client.createDataTask(session: "auth", url: apache.url() + "/basic/small.bin", start: true)
            let completion = try events.wait(for: "didComplete") { $0.task == data.id && $0.isDidComplete }
            #expect(completion.completionResponse?.status == 200)
            #expect(completion.completionResponse?.bodyBytesDecoded == small)
            #expect(!daemon.log().contains(Self.alice.password))

            // The same through halftunesctl: the password from a file, never printed.
            let secret = home.path + "/.password"
            try "\(Self.alice.password)\n".write(toFile: secret, atomically: true, encoding: .utf8)
            let noOrigin = try ctl(["session", "open", "cli", "--user", "alice", "--password-file", secret], socket: daemon.socketPath)
            #expect(noOrigin.status != 0 && noOrigin.stderr.contains("--user needs --origin"), "\(noOrigin.stderr)")
            let cli = try ctl(["session", "open", "cli", "--user", "alice", "--origin", apache.url() + "/",
                               "--password-file", secret], socket: daemon.socketPath)
            #expect(cli.status == 0, "\(cli.stderr)")
            #expect(cli.stdout.contains("credentials:        user alice at \(apache.url()), password hidden"), "\(cli.stdout)")
            #expect(!cli.stdout.contains(Self.alice.password))
            let fetched = try ctl(["download", apache.url() + "/basic/small.bin", "--session", "cli",
                                   "--destination", daemon.downloadsDir + "/cli.bin", "--wait"], socket: daemon.socketPath)
            #expect(fetched.status == 0, "\(fetched.stdout) \(fetched.stderr)")
            #expect(try sha256(ofFile: daemon.downloadsDir + "/cli.bin") == TestOrigin.sha256Hex(small))
        }
    }

    /// No credentials, wrong ones, and credentials for another origin: each fails at once with
    /// `authenticationRequired` naming the scheme and realm; the credentials never reach another origin than the
    /// one they name, whether a task names it or a redirect leads there, while a redirect to the origin they
    /// name is answered.
    @Test func missingWrongAndForeignCredentialsFail() async throws {
        let home = try TempDir()
        try Self.put(TestOrigin.randomBytes(count: 1000, seed: 2912), at: "/digest/f.bin", in: home)
        try Self.put(TestOrigin.randomBytes(count: 1000, seed: 2913), at: "/basic/f.bin", in: home)
        let apache = try Self.apache(home: home)
        defer { apache.stop() }
        try await withDaemon { daemon, origin in
            let client = try daemon.client()
            _ = try client.openSession("none")
            _ = try client.openSession("wrong", configuration: SessionConfiguration(
                credentials: Self.alice(at: apache.url(), password: "not-it")))
            _ = try client.openSession("right", configuration: SessionConfiguration(credentials: Self.alice(at: apache.url())))
            _ = try client.openSession("elsewhere", configuration: SessionConfiguration(credentials: Self.alice(at: origin.url(""))))
            func failure(_ url: String, _ session: String) throws -> TaskError {
                let t = try client.startDownload(url, session: session, destination: "\(session)-\(UUID().uuidString)")
                return try #require(try client.waitFor(task: t.id, state: .failed).error)
            }

            let none = try failure(apache.url() + "/digest/f.bin", "none")
            #expect(none.code == TaskErrorCode.authenticationRequired)
            #expect(none.message.contains(#"asks for credentials (Digest realm "digest realm")"#), "\(none.message)")
            let wrong = try failure(apache.url() + "/digest/f.bin", "wrong")
            #expect(wrong.code == TaskErrorCode.authenticationRequired)
            #expect(wrong.message.contains(#"refused the credentials of user 'alice' (Digest realm "digest realm")"#), "\(wrong.message)")
            let wrongBasic = try failure(apache.url() + "/basic/f.bin", "wrong")
            #expect(wrongBasic.message.contains(#"(Basic realm "basic realm")"#), "\(wrongBasic.message)")

            // A data task fails the same way and hands the 401 over (as URLSession does): its challenge, its body.
            let data = try client.createTask(TaskCreateParams(session: "none", url: apache.url() + "/digest/f.bin",
                                                              start: true, kind: .data))
            let refused = try client.waitFor(task: data.id, state: .failed)
            #expect(refused.error?.code == TaskErrorCode.authenticationRequired, "\(String(describing: refused.error))")
            let answer = try #require(refused.response, "the 401 is kept")
            #expect(answer.status == 401 && answer.bodyBytes > 0, "\(answer)")
            #expect(answer.headers?.contains { $0.first?.lowercased() == "www-authenticate" && $0.last?.hasPrefix("Digest") == true } == true,
                    "\(String(describing: answer.headers))")

            // Credentials for the test origin only: a task pointed at apache, and a redirect there, get a 401 that
            // nothing answers (the issue's row: one link of a feed would collect the password).
            var redirect = TestOrigin.Behavior()
            redirect.redirectTo = apache.url() + "/basic/f.bin"
            origin.setBehavior("/elsewhere", redirect)
            let before = apache.log().split(separator: "\n").count
            let pointed = try failure(apache.url() + "/basic/f.bin", "elsewhere")
            #expect(pointed.code == TaskErrorCode.authenticationRequired)
            #expect(pointed.message.contains("only for http://127.0.0.1:\(origin.port), never sent to \(apache.url())"),
                    "\(pointed.message)")
            let foreign = try failure(origin.url("/elsewhere"), "elsewhere")
            #expect(foreign.code == TaskErrorCode.authenticationRequired, "\(foreign.message)")
            let after = apache.log().split(separator: "\n").dropFirst(before)
            #expect(after.count >= 2 && after.allSatisfy { $0.hasSuffix("auth=-") }, "no credentials reached apache: \(after)")
            // Credentials for apache: the redirect to it is answered, as URLCredentialStorage answers a
            // protection space wherever the request came from.
            let redirected = try client.startDownload(origin.url("/elsewhere"), session: "right", destination: "redirected.bin")
            _ = try client.waitFor(task: redirected.id, state: .completed)
            #expect(!daemon.log().contains(Self.alice.password))
        }
    }

    /// Credentials without an origin, the form before: refused on the wire with words that give the new form; a
    /// session journaled with them (a journal of an earlier daemon, migrated at start) keeps them, `session show`
    /// says they go nowhere, and they go nowhere until the session is opened again with an origin.
    @Test func credentialsWithoutAnOriginGoNowhere() async throws {
        let home = try TempDir()
        try Self.put(TestOrigin.randomBytes(count: 1000, seed: 5402), at: "/basic/f.bin", in: home)
        let apache = try Self.apache(home: home)
        defer { apache.stop() }
        try await withDaemon { daemon, _ in
            let s = try RawSocket(path: daemon.socketPath)
            try s.send(#"{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"identifier":"old","configuration":{"credentials":{"user":"alice","password":"s3cret-29"}}}}"# + "\n")
            let refused = try #require(try s.readObject())
            #expect(refused.errorCode == -32602, "\(refused)")
            #expect(refused.errorMessage?.contains(#"[{"origin":"https://files.example","user":"alice","password":"…"}]"#) == true,
                    "\(refused)")
            try s.send(#"{"jsonrpc":"2.0","id":2,"method":"session.open","params":{"identifier":"old","configuration":{"credentials":[{"user":"alice","password":"s3cret-29"}]}}}"# + "\n")
            let noOrigin = try #require(try s.readObject())
            #expect(noOrigin.errorCode == -32602 && noOrigin.errorMessage?.contains("names no origin") == true, "\(noOrigin)")

            // A journal of the daemon before: the session's configuration holds the single {user, password}.
            var client = try daemon.client()
            _ = try client.openSession("old", configuration: SessionConfiguration(credentials: Self.alice(at: apache.url())))
            _ = try daemon.terminate()
            let journal = daemon.stateDir + "/journal.sqlite"
            let edit = """
                import sqlite3, sys
                db = sqlite3.connect(sys.argv[1])
                db.execute("UPDATE sessions SET configuration = json_set(configuration, '$.credentials', json(?)) WHERE identifier LIKE '%/old'",
                           ['{"user":"alice","password":"s3cret-29"}'])
                db.execute("DELETE FROM grdb_migrations WHERE identifier = 'v15'")
                db.commit()
                """
            #expect(try runTool("/usr/bin/python3", ["-c", edit, journal]) == 0)
            try daemon.restart()
            client = try daemon.client()
            let shown = try ctl(["session", "show", "old"], socket: daemon.socketPath)
            #expect(shown.stdout.contains("user alice, for no origin: sent nowhere"), "\(shown.stdout)")
            #expect(try client.openSession("old").session.configuration.credentials
                    == [OriginCredentials(origin: nil, user: "alice", password: "***")])
            let before = apache.log().split(separator: "\n").count
            let t = try client.startDownload(apache.url() + "/basic/f.bin", session: "old", destination: "old.bin")
            let failed = try client.waitFor(task: t.id, state: .failed)
            #expect(failed.error?.code == TaskErrorCode.authenticationRequired, "\(String(describing: failed.error))")
            #expect(apache.log().split(separator: "\n").dropFirst(before).allSatisfy { $0.hasSuffix("auth=-") })
            // Another option changed from the CLI keeps them as they are; an origin makes them answer.
            let other = try ctl(["session", "open", "old", "--max-concurrent", "3"], socket: daemon.socketPath)
            #expect(other.status == 0, "\(other.stderr)")
            let secret = home.path + "/.password"
            try "\(Self.alice.password)\n".write(toFile: secret, atomically: true, encoding: .utf8)
            let given = try ctl(["session", "open", "old", "--user", "alice", "--origin", apache.url(), "--password-file", secret],
                                socket: daemon.socketPath)
            #expect(given.status == 0, "\(given.stderr)")
            let retried = try client.startDownload(apache.url() + "/basic/f.bin", session: "old", destination: "again.bin")
            _ = try client.waitFor(task: retried.id, state: .completed)
        }
    }

    /// A task's own credentials, in its URL's userinfo or given with it, win over the session's (here: none). The
    /// URL is stored, shown and logged without them, and they survive kill -9 (the resumed attempt is challenged
    /// and answered again); both forms at once are refused.
    @Test func aTasksOwnCredentials() async throws {
        let home = try TempDir()
        let body = TestOrigin.randomBytes(count: 12 * MiB, seed: 2914)
        try Self.put(body, at: "/digest/own.bin", in: home)
        let apache = try Self.apache(home: home)
        defer { apache.stop() }
        try await withDaemon { daemon, _ in
            var client = try daemon.client()
            let withUserinfo = apache.url().replacingOccurrences(of: "http://", with: "http://alice:\(Self.alice.password)@")
                + "/digest/own.bin"
            let t = try client.startDownload(withUserinfo, session: "own", destination: "own.bin")
            #expect(t.url == apache.url() + "/digest/own.bin", "the URL is stored without its userinfo: \(t.url)")
            try eventually("4 MiB durable") { try client.task(t.id).bytesDurable >= Int64(4 * MiB) ? true : nil }
            daemon.kill9()
            try daemon.restart()
            client = try daemon.client()
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let list = try ctl(["list"], socket: daemon.socketPath)
            #expect(!list.stdout.contains(Self.alice.password) && !daemon.log().contains(Self.alice.password))
            let resumed = apache.log().split(separator: "\n").filter { $0.contains("/digest/own.bin") && $0.contains(" 206 ") }
            #expect(!resumed.isEmpty, "resumed with Range after the restart: \(apache.log())")

            let given = try client.createTask(TaskCreateParams(session: "own", url: apache.url() + "/digest/own.bin",
                                                               destination: "given.bin", start: true, credentials: Self.alice))
            let givenDone = try client.waitFor(task: given.id, state: .completed)
            #expect(try sha256(ofFile: givenDone.location!) == TestOrigin.sha256Hex(body))

            #expect(throws: HalfTunesClientError.self) {
                try client.createTask(TaskCreateParams(session: "own", url: withUserinfo, destination: "both.bin",
                                                       credentials: Self.alice))
            }
        }
    }

    /// The daemon's netrc file (`--netrc`, like `curl --netrc`) answers apache's Basic challenge for the daemon's own
    /// user's tasks that have no credentials; the session's credentials win over it; another user's task never
    /// gets the daemon user's passwords.
    @Test func theDaemonUsersNetrc() async throws {
        let home = try TempDir()
        defer { home.remove() }
        let small = TestOrigin.randomBytes(count: 300_000, seed: 2939)
        try Self.put(small, at: "/basic/small.bin", in: home)
        let apache = try Self.apache(home: home)
        defer { apache.stop() }
        let files = try TempDir()
        defer { files.remove() }
        let netrc = files.path + "/netrc"
        try "machine elsewhere.example login nobody password nothing\nmachine 127.0.0.1\n  login alice\n  password \(Self.alice.password)\n"
            .write(toFile: netrc, atomically: true, encoding: .utf8)
        _ = chmod(netrc, 0o600)
        try await withDaemon(["--netrc", netrc]) { daemon, _ in
            let url = apache.url() + "/basic/small.bin"
            let mine = try ctl(["download", url, "--destination", daemon.downloadsDir + "/mine.bin", "--wait"],
                               socket: daemon.socketPath)
            #expect(mine.status == 0, "\(mine.stdout)\(mine.stderr)")
            #expect(try sha256(ofFile: daemon.downloadsDir + "/mine.bin") == TestOrigin.sha256Hex(small))
            #expect(apache.log().contains("auth=Basic"), "\(apache.log())")

            // The session's own (wrong) credentials win over the file's.
            let client = try daemon.client()
            _ = try client.openSession("wrong", configuration: SessionConfiguration(
                credentials: Self.alice(at: apache.url(), password: "not-it")))
            let wrong = try client.createTask(TaskCreateParams(session: "wrong", url: url, destination: "wrong.bin", start: true))
            let failed = try client.waitFor(task: wrong.id, state: .failed)
            #expect(failed.error?.code == TaskErrorCode.authenticationRequired, "\(String(describing: failed.error))")

            guard getuid() == 0 else { return }
            chmod(daemon.dir.path, 0o711)
            chmod(daemon.socketPath, 0o666)
            chmod(daemon.downloadsDir, 0o711)
            let theirs = try ctl(["download", url, "--session", "theirs", "--wait"], socket: daemon.socketPath,
                                 asUser: (65534, 65534))
            #expect(theirs.status != 0 && (theirs.stdout + theirs.stderr).contains("asks for credentials"),
                    "another user's task gets no credentials from the daemon user's netrc: \(theirs.stdout)\(theirs.stderr)")
        }
    }
}
