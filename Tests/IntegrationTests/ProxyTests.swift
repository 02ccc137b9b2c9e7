// Proxies through the real binaries: Debian's tinyproxy (HTTP: forwarding, CONNECT, Basic auth) and dante (SOCKS5) in front
// of the test origin; a session's proxy, the daemon's, curl's environment variables and their bypass list.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Proxies", .serialized)
struct ProxyTests {
    /// Waits until the task waits with `proxyFailure` and returns that reason.
    static func proxyFailure(_ client: HalfTunesClient, _ id: Int64) throws -> TaskError {
        try eventually("task \(id) to wait with proxyFailure") {
            let t = try client.task(id)
            if t.state.isTerminal { throw TestFailure("task \(id) ended \(t.state.rawValue): \(t.error?.message ?? "")") }
            return t.waitingReason?.code == TaskErrorCode.proxyFailure ? t.waitingReason : nil
        }
    }

    /// http and https through tinyproxy with Basic credentials: the password never shows (CLI, JSON, log), a
    /// kill -9 mid-download resumes through the proxy with Range + If-Range, SHA-256 right; plain http was forwarded
    /// (`GET http://…`, no tunnel), https went through a CONNECT tunnel; sending back the shown (redacted)
    /// configuration keeps the password.
    @Test func httpAndHttpsThroughAnAuthenticatingProxy() async throws {
        let proxy = try ProxyProcess.tinyproxy(basicAuth: ("alice", "s3cret-42"))
        defer { proxy.stop() }
        try await withSecureOrigin { ca, secure in
            try await withDaemon(["--ca-file", ca.caCertificate]) { daemon, plain in
                let body = TestOrigin.randomBytes(count: 3 * MiB, seed: 1501)
                plain.put("/big.bin", body)
                plain.setBehavior("/big.bin", .throttled(1 * MiB))
                secure.put("/secure.bin", body)
                let socket = daemon.socketPath
                let opened = try ctl(["session", "open", "viaproxy", "--proxy", proxy.url(user: "alice", password: "s3cret-42")], socket: socket)
                #expect(opened.status == 0, "\(opened.stderr)")
                #expect(opened.stdout.contains("proxy:              http://alice:***@127.0.0.1:\(proxy.port)"), "\(opened.stdout)")
                let listed = try ctl(["sessions", "--json"], socket: socket)
                #expect(listed.stdout.contains("alice:***@") && !listed.stdout.contains("s3cret"), "\(listed.stdout)")

                // http, killed mid-download, resumed through the proxy.
                let client = try daemon.client()
                let t = try client.createTask(TaskCreateParams(session: "viaproxy", url: plain.url("/big.bin"), destination: "big.bin",
                                                               start: true, maxConnections: 1))
                try eventually("some bytes durable") { try client.task(t.id).bytesDurable > 256 * 1024 ? true : nil }
                daemon.kill9()
                plain.setBehavior("/big.bin", TestOrigin.Behavior())
                try daemon.restart()
                let done = try daemon.client().waitFor(task: t.id, state: .completed)
                #expect(try sha256(ofFile: done.location ?? "") == TestOrigin.sha256Hex(body))
                let resumed = plain.requests("/big.bin").last
                #expect(resumed?.range?.hasPrefix("bytes=") == true && resumed?.ifRange != nil, "resumed with Range + If-Range")
                #expect(proxy.forwarded().filter { $0 == "GET \(plain.url("/big.bin"))" }.count >= 2, "\(proxy.log())")
                #expect(proxy.tunnels().isEmpty, "plain http is not tunnelled: \(proxy.tunnels())")

                // https through the CONNECT tunnel, by the CLI.
                let https = try ctl(["download", "--session", "viaproxy", secure.url("/secure.bin"), "--destination",
                                     daemon.downloadsDir + "/secure.bin", "--wait"], socket: socket)
                #expect(https.status == 0, "\(https.stdout)\(https.stderr)")
                #expect(try sha256(ofFile: daemon.downloadsDir + "/secure.bin") == TestOrigin.sha256Hex(body))
                #expect(proxy.tunnels().contains("CONNECT 127.0.0.1:\(secure.port)"), "\(proxy.tunnels())")

                // The CLI changes another setting: it sends back the shown configuration, the password stays.
                let changed = try ctl(["session", "open", "viaproxy", "--max-concurrent", "2"], socket: socket)
                #expect(changed.status == 0 && changed.stdout.contains("alice:***@"), "\(changed.stdout)\(changed.stderr)")
                let again = try daemon.client().startDownload(secure.url("/secure.bin"), session: "viaproxy", destination: "again.bin")
                let second = try daemon.client().waitFor(task: again.id, state: .completed)
                #expect(try sha256(ofFile: second.location ?? "") == TestOrigin.sha256Hex(body))
                #expect(!daemon.log().contains("s3cret"), "the password is never logged")
                #expect(!(try String(contentsOfFile: proxy.logPath, encoding: .utf8)).isEmpty)
            }
        }
    }

    /// Wrong or missing credentials, a tunnel the proxy forbids and a proxy nobody answers on: the task waits with
    /// `proxyFailure` and words that name the cause (the proxy's own status when it gave one), nothing reaches the
    /// origin; fixing the session's proxy and resuming completes it.
    @Test func aRefusingProxyGivesProxyFailureUntilFixed() async throws {
        let proxy = try ProxyProcess.tinyproxy(basicAuth: ("alice", "right"))
        defer { proxy.stop() }
        let strict = try ProxyProcess.tinyproxy(connectPorts: [443])
        defer { strict.stop() }
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 400_000, seed: 1502)
            origin.put("/f.bin", body)
            let client = try daemon.client()
            func download(_ session: String, proxyURL: String, _ name: String, tunnel: Bool? = nil) throws -> Int64 {
                _ = try client.openSession(session, configuration: SessionConfiguration(proxy: proxyURL, proxyTunnel: tunnel))
                return try client.createTask(TaskCreateParams(session: session, url: origin.url("/f.bin"), destination: name, start: true)).id
            }
            // Through a tunnel (tinyproxy answers the CONNECT with 401).
            let wrong = try download("wrong", proxyURL: proxy.url(user: "alice", password: "wrong"), "wrong.bin", tunnel: true)
            let reason = try Self.proxyFailure(client, wrong)
            #expect(reason.message.contains("refused the credentials of user 'alice'") && reason.httpStatus == 401, "\(reason)")
            // Forwarded: tinyproxy refuses wrong credentials with a server's 401 and `WWW-Authenticate` (realm
            // "Tinyproxy"), not 407; without the `Via` a response it passes on has, it is the proxy's own answer.
            let forwarded = try download("forwarded", proxyURL: proxy.url(user: "alice", password: "wrong"), "forwarded.bin")
            let forwardedRefusal = try Self.proxyFailure(client, forwarded)
            #expect(forwardedRefusal.message.contains("refused the credentials of user 'alice'")
                && forwardedRefusal.httpStatus == 401, "\(forwardedRefusal)")
            #expect(!reason.message.contains("wrong"), "no password in the message: \(reason.message)")
            let shown = try ctl(["show", "\(wrong)"], socket: daemon.socketPath)
            #expect(shown.stdout.contains("proxyFailure") && shown.stdout.contains("refused the credentials"), "\(shown.stdout)")

            // Forwarded without credentials: tinyproxy answers 407.
            let none = try download("none", proxyURL: proxy.url(), "none.bin")
            let asks = try Self.proxyFailure(client, none)
            #expect(asks.message.contains("asks for credentials") && asks.httpStatus == 407, "\(asks)")

            // Plain http tunnelled on request (curl's --proxytunnel): a proxy that tunnels only to 443 refuses it.
            let forbidden = try download("strict", proxyURL: strict.url(), "strict.bin", tunnel: true)
            let refusal = try Self.proxyFailure(client, forbidden)
            #expect(refusal.message.contains("forbids a tunnel to 127.0.0.1:\(origin.port)") && refusal.httpStatus == 403, "\(refusal)")

            let deadPort = try freeLoopbackPort()
            let dead = try download("dead", proxyURL: "http://127.0.0.1:\(deadPort)", "dead.bin")
            #expect(try Self.proxyFailure(client, dead).message.contains("Cannot connect to the proxy http://127.0.0.1:\(deadPort)"))
            let unknown = try download("unknown", proxyURL: "http://proxy.invalid:3128", "unknown.bin")
            #expect(try Self.proxyFailure(client, unknown).message.contains("cannot resolve its host"))
            #expect(origin.requests("/f.bin").isEmpty, "nothing reached the origin")

            // Fixed by the user: the next attempt uses the session's new proxy.
            let fixed = try ctl(["session", "open", "wrong", "--proxy", proxy.url(user: "alice", password: "right")], socket: daemon.socketPath)
            #expect(fixed.status == 0, "\(fixed.stderr)")
            _ = try ctl(["resume", "\(wrong)"], socket: daemon.socketPath)
            let done = try client.waitFor(task: wrong, state: .completed)
            #expect(try sha256(ofFile: done.location ?? "") == TestOrigin.sha256Hex(body))

            let bad = try ctl(["session", "open", "bad", "--proxy", "socks5://u:p@127.0.0.1:1"], socket: daemon.socketPath)
            #expect(bad.status != 0 && bad.stderr.contains("no authentication") && !bad.stderr.contains("u:p@"), "\(bad.stderr)")
        }
    }

    /// The user daemon follows curl's variables: `http_proxy` for http, `no_proxy` skipping hosts; a session with
    /// `--proxy direct` skips it; `status` names it. The daemon's `--proxy` wins over the environment.
    @Test func theEnvironmentAndTheDaemonsSetting() async throws {
        let proxy = try ProxyProcess.tinyproxy()
        defer { proxy.stop() }
        let deadPort = try freeLoopbackPort()
        try await withDaemon(environment: ["http_proxy": proxy.url(), "no_proxy": "localhost", "HTTPS_PROXY": ""]) { daemon, origin in
            let body = TestOrigin.randomBytes(count: 300_000, seed: 1503)
            origin.put("/a.bin", body)
            let client = try daemon.client()
            let status = try ctl(["status"], socket: daemon.socketPath)
            #expect(status.stdout.contains("proxy:    http://127.0.0.1:\(proxy.port) for http, direct for https, bypassing localhost (environment)"),
                    "\(status.stdout)")

            let through = try client.startDownload(origin.url("/a.bin"), destination: "through.bin")
            #expect(try sha256(ofFile: client.waitFor(task: through.id, state: .completed).location ?? "") == TestOrigin.sha256Hex(body))
            let forwarded = proxy.forwarded().count
            #expect(proxy.forwarded().contains("GET \(origin.url("/a.bin"))"), "\(proxy.log())")

            let bypassed = try client.startDownload("http://localhost:\(origin.port)/a.bin", destination: "bypassed.bin")
            try client.waitFor(task: bypassed.id, state: .completed)
            _ = try client.openSession("direct", configuration: SessionConfiguration(proxy: "direct"))
            let direct = try client.startDownload(origin.url("/a.bin"), session: "direct", destination: "direct.bin")
            try client.waitFor(task: direct.id, state: .completed)
            #expect(proxy.forwarded().count == forwarded, "no_proxy and a direct session skip the proxy: \(proxy.log())")
            #expect(origin.requests("/a.bin").count >= 3)
        }
        // The daemon's setting wins over a variable that points nowhere.
        try await withDaemon(["--proxy", proxy.url(), "--proxy-bypass", "10.0.0.0/8"],
                             environment: ["http_proxy": "http://127.0.0.1:\(deadPort)"]) { daemon, origin in
            origin.put("/b.bin", TestOrigin.randomBytes(count: 100_000, seed: 1504))
            let client = try daemon.client()
            let t = try client.startDownload(origin.url("/b.bin"), destination: "b.bin")
            try client.waitFor(task: t.id, state: .completed)
            #expect(try client.status().proxy == "http://127.0.0.1:\(proxy.port) for http and https, bypassing 10.0.0.0/8 (configuration)")
            #expect(proxy.forwarded().contains("GET \(origin.url("/b.bin"))"), "\(proxy.log())")
        }
    }

    /// SOCKS5 through dante: a download with SHA-256 right that dante connected for; a target that refuses gives
    /// `proxyFailure` with the proxy's reply.
    @Test func socks5ThroughDante() async throws {
        let socks = try ProxyProcess.dante()
        defer { socks.stop() }
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 1 * MiB, seed: 1505)
            origin.put("/s.bin", body)
            let client = try daemon.client()
            _ = try client.openSession("socks", configuration: SessionConfiguration(proxy: socks.url()))
            let t = try client.createTask(TaskCreateParams(session: "socks", url: "http://localhost:\(origin.port)/s.bin",
                                                           destination: "s.bin", start: true))
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location ?? "") == TestOrigin.sha256Hex(body))
            let accepted = socks.log().components(separatedBy: "tcp/accept [").count - 1
            #expect(accepted >= 1, "dante accepted the daemon's connections:\n\(socks.log())")

            let closed = try freeLoopbackPort()
            let refused = try client.createTask(TaskCreateParams(session: "socks", url: "http://127.0.0.1:\(closed)/x.bin",
                                                                 destination: "x.bin", start: true))
            let reason = try Self.proxyFailure(client, refused.id)
            #expect(reason.message.contains("The SOCKS proxy \(socks.url()) could not connect to 127.0.0.1:\(closed)"), "\(reason)")
            #expect(socks.tunnels().contains("127.0.0.1.\(closed)"), "\(socks.tunnels())")
        }
    }

    /// One uid's transfers go through at most 16 different proxies at once (each proxy gets a client of its
    /// own). A task whose first request needs a 17th waits queued (ProxiesPerUserTests); one whose first request
    /// goes direct but is redirected to a host behind a 17th proxy is refused that proxy's client mid-attempt: it
    /// waits with proxyFailure until another's proxy is free, then every file is whole.
    @Test func aUsersTransfersGoThroughABoundedNumberOfProxies() async throws {
        let proxy = try ProxyProcess.tinyproxy()
        defer { proxy.stop() }
        try await withDaemon(["--max-concurrent", "20", "--max-connections-per-host", "20"]) { daemon, origin in
            let body = TestOrigin.randomBytes(count: 2 * MiB, seed: 2740)
            origin.put("/p.bin", body)
            origin.setBehavior("/p.bin", .throttled(512 * 1024))
            var redirect = TestOrigin.Behavior()
            redirect.redirectTo = origin.url("/p.bin", hostName: "localhost")
            origin.setBehavior("/to-localhost", redirect)
            let client = try daemon.client()
            var ids: [Int64] = []
            for i in 0..<16 {
                _ = try client.openSession("p\(i)", configuration: SessionConfiguration(proxy: proxy.url(user: "u\(i)", password: "p")))
                ids.append(try client.createTask(TaskCreateParams(session: "p\(i)", url: origin.url("/p.bin"),
                                                                  destination: "p\(i).bin", start: true, maxConnections: 1)).id)
            }
            for id in ids {
                try eventually("task \(id) running through its proxy") { try client.task(id).bytesReceived > 0 ? true : nil }
            }
            // 127.0.0.1 is bypassed (direct: no proxy counted when it starts); localhost goes through a 17th proxy.
            _ = try client.openSession("p16", configuration: SessionConfiguration(
                retry: RetryPolicy(initialDelay: 1, maxDelay: 1, jitter: 0),
                proxy: proxy.url(user: "u16", password: "p"), proxyBypass: "127.0.0.1"))
            let redirected = try client.createTask(TaskCreateParams(session: "p16", url: origin.url("/to-localhost"),
                                                                    destination: "p16.bin", start: true, maxConnections: 1))
            let refused = try Self.proxyFailure(client, redirected.id)
            #expect(refused.message.contains("16 different proxies"), "\(refused.message)")
            origin.setBehavior("/p.bin", TestOrigin.Behavior())
            for id in ids + [redirected.id] {
                let done = try client.waitFor(task: id, state: .completed)
                #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            }
        }
    }

    /// The proxy is chosen again at every hop of a redirect (as curl does): a proxied URL that redirects to a
    /// bypassed host is followed directly, and a bypassed URL that redirects to a proxied one goes through the
    /// proxy. The proxy sees only the hops that are its own.
    @Test func everyRedirectHopChoosesItsProxy() async throws {
        let proxy = try ProxyProcess.tinyproxy()
        defer { proxy.stop() }
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 400_000, seed: 2905)
            origin.put("/file.bin", body)
            var toLocalhost = TestOrigin.Behavior()
            toLocalhost.redirectTo = origin.url("/file.bin", hostName: "localhost")
            origin.setBehavior("/to-localhost", toLocalhost)
            var toLoopback = TestOrigin.Behavior()
            toLoopback.redirectTo = origin.url("/file.bin")
            toLoopback.redirectStatus = 307
            origin.setBehavior("/to-loopback", toLoopback)
            let client = try daemon.client()
            // The session's own credentials and cookie go to its tasks' origin only, never to another a hop leads to.
            _ = try client.openSession("hops", configuration: SessionConfiguration(
                headers: ["Authorization": "Bearer secret-token", "Cookie": "c=1"], proxy: proxy.url(),
                proxyBypass: "localhost"))

            // 127.0.0.1 (through the proxy) -> localhost (bypassed: direct).
            let out = try client.startDownload(origin.url("/to-localhost"), session: "hops", destination: "out.bin")
            let outDone = try client.waitFor(task: out.id, state: .completed)
            #expect(try sha256(ofFile: outDone.location!) == TestOrigin.sha256Hex(body))
            // Only the first hop went through the proxy (forwarded); the file's requests went to localhost directly.
            let first = proxy.forwarded()
            #expect(first == ["GET \(origin.url("/to-localhost"))"], "only the first hop is proxied: \(proxy.log())")
            #expect(origin.requests("/file.bin").count >= 1)
            let sent = { (r: TestOrigin.RecordedRequest, name: String) in r.headers.contains { $0.name.lowercased() == name } }
            #expect(origin.requests("/to-localhost").allSatisfy { sent($0, "authorization") && sent($0, "cookie") }, "\(origin.requests("/to-localhost").map(\.headers))")
            #expect(origin.requests("/file.bin").allSatisfy { !sent($0, "authorization") && !sent($0, "cookie") },
                    "another origin (localhost) got the session's credentials")

            // localhost (direct) -> 127.0.0.1 (through the proxy).
            let back = try client.startDownload(origin.url("/to-loopback", hostName: "localhost"), session: "hops",
                                                destination: "back.bin", maxConnections: 1)
            let backDone = try client.waitFor(task: back.id, state: .completed)
            #expect(try sha256(ofFile: backDone.location!) == TestOrigin.sha256Hex(body))
            let second = Array(proxy.forwarded().dropFirst(first.count))
            #expect(second == ["GET \(origin.url("/file.bin"))"], "the second hop is proxied: \(proxy.log())")
            #expect(proxy.tunnels().isEmpty, "\(proxy.tunnels())")
            #expect(origin.requests("/to-loopback").count == 1 && origin.requests("/to-localhost").count == 1)
        }
    }

    /// The scheme chooses the proxy at every hop too: with `https_proxy` only, an http URL is fetched directly and
    /// its redirect to https goes through the proxy; with `http_proxy` only, the other way round.
    @Test func anHTTPToHTTPSRedirectChoosesTheHTTPSProxy() async throws {
        let proxy = try ProxyProcess.tinyproxy()
        defer { proxy.stop() }
        try await withSecureOrigin { ca, secure in
            let body = TestOrigin.randomBytes(count: 200_000, seed: 2915)
            secure.put("/file.bin", body)
            for (environment, proxiedPort) in [(["https_proxy": proxy.url()], secure.port), (["http_proxy": proxy.url()], 0)] {
                try await withDaemon(["--ca-file", ca.caCertificate], environment: environment) { daemon, plain in
                    var up = TestOrigin.Behavior()
                    up.redirectTo = secure.url("/file.bin")
                    plain.setBehavior("/up", up)
                    let before = proxy.tunnels().count
                    let forwardedBefore = proxy.forwarded().count
                    let client = try daemon.client()
                    let t = try client.startDownload(plain.url("/up"), destination: "up.bin", maxConnections: 1)
                    let done = try client.waitFor(task: t.id, state: .completed)
                    #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
                    let tunnels = Array(proxy.tunnels().dropFirst(before))
                    if proxiedPort != 0 {
                        #expect(!tunnels.isEmpty && tunnels.allSatisfy { $0 == "CONNECT 127.0.0.1:\(secure.port)" },
                                "only the https hop is proxied: \(tunnels)")
                    } else {
                        #expect(tunnels.isEmpty && Array(proxy.forwarded().dropFirst(forwardedBefore)) == ["GET \(plain.url("/up"))"],
                                "only the http hop is proxied (forwarded): \(proxy.log())")
                    }
                }
            }
        }
    }
}
