import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// https through the real daemon: an origin with a certificate from a test CA the daemon trusts through
/// `--ca-file`; a redirect from https to http is refused unless the session allows it.
@Suite("https and insecure redirects")
struct TLSRedirectTests {
    @Test func httpsWorksAndADowngradeRedirectIsRefusedUnlessAllowed() async throws {
        try await withSecureOrigin { ca, secure in
            try await withDaemon(["--ca-file", ca.caCertificate]) { daemon, plain in
                let body = TestOrigin.randomBytes(count: 500_000, seed: 80)
                secure.put("/direct.bin", body)
                plain.put("/plain.bin", body)
                var hop = TestOrigin.Behavior()
                hop.redirectTo = plain.url("/plain.bin")
                secure.setBehavior("/down", hop)
                let client = try daemon.client()

                // https itself, verified against the test CA.
                let direct = try client.startDownload(secure.url("/direct.bin"), session: "tls", destination: "direct.bin")
                let done = try client.waitFor(task: direct.id, state: .completed)
                #expect(try sha256(ofFile: done.location ?? "") == TestOrigin.sha256Hex(body))

                // https → http: refused, and the http URL is never requested.
                let down = try client.startDownload(secure.url("/down"), session: "tls", destination: "down.bin")
                let refused = try client.waitFor(task: down.id, state: .failed)
                #expect(refused.error?.code == TaskErrorCode.redirectRefused, "\(String(describing: refused.error))")
                #expect(secure.requests("/down").count == 1)
                #expect(plain.requests("/plain.bin").isEmpty, "the refused http URL was requested")
                #expect(!FileManager.default.fileExists(atPath: daemon.downloadsDir + "/down.bin"))

                // A session that allows it (set through the CLI) follows it; the task shows where it ended.
                let allowed = try ctl(["session", "open", "lax", "--insecure-redirects"], socket: daemon.socketPath)
                #expect(allowed.status == 0 && allowed.stdout.contains("https→http:         followed"), "\(allowed.stdout)\(allowed.stderr)")
                let lax = try client.createTask(TaskCreateParams(session: "lax", url: secure.url("/down"), destination: "lax.bin", start: true))
                let followed = try client.waitFor(task: lax.id, state: .completed)
                #expect(followed.currentURL == plain.url("/plain.bin"))
                #expect(try sha256(ofFile: followed.location ?? "") == TestOrigin.sha256Hex(body))
            }
        }
    }

    /// Without the CA the same server is not trusted: the task fails at once (retrying cannot help) with
    /// `tlsFailure` and a message pointing at `ca-file`; no request is sent, nothing is kept.
    @Test func anUntrustedCertificateFailsTheTask() async throws {
        try await withSecureOrigin { ca, secure in
            try await withDaemon { daemon, _ in
                secure.put("/f.bin", TestOrigin.randomBytes(count: 1000, seed: 81))
                let client = try daemon.client()
                let t = try client.startDownload(secure.url("/f.bin"), session: "tls", destination: "f.bin")
                let ended = try client.waitFor(task: t.id, state: .failed)
                let error = try #require(ended.error)
                #expect(error.code == TaskErrorCode.tlsFailure && error.message.contains("ca-file"), "\(error)")
                #expect(ended.attempts == 1)
                #expect(secure.requests("/f.bin").isEmpty, "a request was sent over an untrusted connection")
                #expect(!FileManager.default.fileExists(atPath: daemon.downloadsDir + "/f.bin"))
            }
        }
    }

    @Test func anUnreadableCAFileStopsTheDaemonWithAClearError() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try "not a certificate\n".write(toFile: dir.path + "/bad.pem", atomically: true, encoding: .utf8)
        for file in [dir.path + "/missing.pem", dir.path + "/bad.pem"] {
            let r = try runCommand(Binaries.daemon, ["--config", "/dev/null", "--socket", dir.path + "/s.sock",
                                                     "--state-dir", dir.path + "/state", "--downloads-dir", dir.path + "/dl",
                                                     "--ca-file", file])
            #expect(r.status != 0 && r.stderr.contains("ca-file"), "\(r)")
        }
    }
}
