// Plain http forwarded to HTTP proxies (absolute form) through the real binaries: the test origin standing in for a
// proxy, Debian's squid and tinyproxy with their stock access rules in front of nginx, apache2 behind them asking
// for Digest.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Forwarding through HTTP proxies", .serialized)
struct ProxyForwardingTests {
    /// The test origin accepts absolute-form requests, so it can stand in for the proxy and show exactly what
    /// reached it: every request of a redirect chain is `GET http://files.invalid/…` (a name only the proxy would
    /// resolve: the daemon never looks it up), carries `Proxy-Authorization` (and no `Authorization`), and all of
    /// them went on one kept-alive connection.
    @Test func absoluteFormWithProxyAuthorizationOnOneKeptAliveConnection() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 600_000, seed: 2930)
            origin.put("/a.bin", body)
            var first = TestOrigin.Behavior()
            first.redirectTo = "/r2"
            origin.setBehavior("/r1", first)
            var second = TestOrigin.Behavior()
            second.redirectTo = "http://files.invalid/a.bin"
            second.redirectStatus = 301
            origin.setBehavior("/r2", second)
            let client = try daemon.client()
            _ = try client.openSession("fwd", configuration: SessionConfiguration(
                proxy: "http://alice:pw@127.0.0.1:\(origin.port)"))
            let t = try client.createTask(TaskCreateParams(session: "fwd", url: "http://files.invalid/r1", destination: "a.bin",
                                                           start: true, maxConnections: 1))
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let requests = origin.requests()
            #expect(requests.map(\.uri) == ["http://files.invalid/r1", "http://files.invalid/r2", "http://files.invalid/a.bin"],
                    "\(requests.map(\.uri))")
            let basic = "Basic " + Data("alice:pw".utf8).base64EncodedString()
            #expect(requests.allSatisfy { $0.header("Proxy-Authorization") == basic && $0.header("Host") == "files.invalid" },
                    "\(requests.map(\.headers))")
            #expect(requests.allSatisfy { $0.header("Authorization") == nil })
            #expect(Set(requests.map(\.connection)).count == 1, "one connection to the proxy: \(requests.map(\.connection))")

            // A data task and an upload take the same path.
            let data = try client.createTask(TaskCreateParams(session: "fwd", url: "http://files.invalid/a.bin", start: true,
                                                              kind: .data))
            let fetched = try client.waitFor(task: data.id, state: .completed)
            #expect(fetched.response?.status == 200)
            #expect(origin.requests("/a.bin").last?.uri == "http://files.invalid/a.bin")
        }
    }

    /// The proxies of the matrix, each with its stock access rules; `tlsPort` joins the ports they tunnel to (a
    /// port setting: the stock rules allow CONNECT to 443 only, and the tests bind no fixed port).
    enum Proxy: String, CaseIterable, Sendable {
        case squid, tinyproxy

        func start(tlsPort: Int) throws -> ProxyProcess {
            switch self {
            case .squid: try ProxyProcess.squid(sslPorts: [tlsPort])
            case .tinyproxy: try ProxyProcess.tinyproxy(connectPorts: [443, 563, tlsPort])
            }
        }

        func authenticating(_ user: String, _ password: String) throws -> ProxyProcess {
            switch self {
            case .squid: try ProxyProcess.squid(basicAuth: (user, password))
            case .tinyproxy: try ProxyProcess.tinyproxy(basicAuth: (user, password))
            }
        }
    }

    /// A proxy with its stock rules in front of nginx (paced, plain http and https): a plain http and an https
    /// download through it at once, both split; kill -9, and the restart's `Range` + `If-Range` reach nginx and are
    /// answered 206; both files whole. The proxy's log shows the absolute URL for plain http and a CONNECT for
    /// https. A file replaced while paused: the new version, whole. A proxy that asks for credentials refuses wrong
    /// ones: `proxyFailure` with words, for the tunnel and the forwarded request alike.
    @Test(arguments: Proxy.allCases)
    func inFrontOfNginx(proxy kind: Proxy) async throws {
        let certificates = try TempDir()
        defer { certificates.remove() }
        let ca = try TestCA(in: certificates.path)
        let home = try TempDir()
        defer { home.remove() }
        _ = chmod(home.path, 0o755)
        let plainBody = TestOrigin.randomBytes(count: 16 * MiB, seed: 2940)
        let secureBody = TestOrigin.randomBytes(count: 16 * MiB, seed: 2941)
        ServerMatrixTests.put(plainBody, "/plain.bin", in: home.path)
        ServerMatrixTests.put(secureBody, "/secure.bin", in: home.path)
        let tlsPort = try freeLoopbackPort()
        let nginx = try ProxyProcess.nginx(home: home.path, server: """
            limit_rate 4m;
            listen 127.0.0.1:\(tlsPort) ssl;
            ssl_certificate \(ca.server.certificate);
            ssl_certificate_key \(ca.server.privateKey);
            """)
        defer { nginx.stop() }
        let proxy = try kind.start(tlsPort: tlsPort)
        defer { proxy.stop() }
        let plainURL = nginx.url() + "/plain.bin", secureURL = "https://127.0.0.1:\(tlsPort)/secure.bin"
        try await withDaemon(["--ca-file", ca.caCertificate]) { daemon, _ in
            var client = try daemon.client()
            _ = try client.openSession("p", configuration: SessionConfiguration(proxy: proxy.url()))
            let plain = try client.createTask(TaskCreateParams(session: "p", url: plainURL, destination: "plain.bin", start: true))
            let secure = try client.createTask(TaskCreateParams(session: "p", url: secureURL, destination: "secure.bin", start: true))
            try SegmentedTests.waitUntilSplit(client, plain.id, durable: Int64(2 * MiB))
            try SegmentedTests.waitUntilSplit(client, secure.id, durable: Int64(2 * MiB))
            daemon.kill9()
            let before = (nginx.nginxRequests("/plain.bin").count, nginx.nginxRequests("/secure.bin").count)
            try daemon.restart()
            client = try daemon.client()
            #expect(try sha256(ofFile: client.waitFor(task: plain.id, state: .completed).location!) == TestOrigin.sha256Hex(plainBody))
            #expect(try sha256(ofFile: client.waitFor(task: secure.id, state: .completed).location!) == TestOrigin.sha256Hex(secureBody))
            for (path, count, viaProxy) in [("/plain.bin", before.0, true), ("/secure.bin", before.1, false)] {
                let all = try eventually("nginx's log of \(path) after the restart") {
                    () -> [(status: Int, range: String?, ifRange: String?, via: String?)]? in
                    let all = nginx.nginxRequests(path)
                    return all.count > count && all.filter({ $0.ifRange != nil }).count >= 1 ? all : nil
                }
                #expect(all.filter { $0.range == nil }.count == 1 && all.filter { $0.status == 200 }.count == 1,
                        "\(kind) \(path): one whole response, the rest ranges: \(nginx.log())")
                #expect(all.filter { $0.range != nil }.allSatisfy { $0.status == 206 }, "\(kind) \(path): \(nginx.log())")
                #expect(all.contains { $0.ifRange != nil }, "\(kind) \(path): the restart sent If-Range")
                // Forwarded requests carry the proxy's Via; tunnelled ones are the daemon's own, end to end.
                #expect(all.allSatisfy { ($0.via != nil) == viaProxy }, "\(kind) \(path): \(nginx.log())")
            }
            let logged = try eventually("\(kind)'s log of the tunnel") { () -> (forwarded: [String], tunnels: [String])? in
                let tunnels = proxy.tunnels()
                return tunnels.isEmpty ? nil : (proxy.forwarded(), tunnels)
            }
            #expect(!logged.forwarded.isEmpty && logged.forwarded.allSatisfy { $0 == "GET \(plainURL)" }, "\(proxy.log())")
            #expect(logged.tunnels.allSatisfy { $0 == "CONNECT 127.0.0.1:\(tlsPort)" }, "\(proxy.log())")

            // Replaced while paused (the proxy passes If-Range on).
            try ServerMatrixTests.expectReplacedWhilePausedIsWhole(client, nginx.url() + "/changing.bin", session: "p",
                                                                   size: 8 * MiB, seed: 2942) { body, first in
                ServerMatrixTests.put(body, "/changing.bin", in: home.path, age: first ? 7200 : 60)
            }

            // Wrong credentials.
            let guarded = try kind.authenticating("carol", "right")
            defer { guarded.stop() }
            _ = try client.openSession("wrong", configuration: SessionConfiguration(
                proxy: guarded.url(user: "carol", password: "wrong")))
            let wrongSecure = try client.createTask(TaskCreateParams(session: "wrong", url: secureURL, destination: "w1.bin",
                                                                     start: true))
            let tunnelRefusal = try ProxyTests.proxyFailure(client, wrongSecure.id)
            #expect(tunnelRefusal.message.contains("refused the credentials of user 'carol'"), "\(kind): \(tunnelRefusal)")
            let wrongPlain = try client.createTask(TaskCreateParams(session: "wrong", url: plainURL, destination: "w2.bin",
                                                                    start: true))
            // squid answers 407; tinyproxy a server's 401 (without the Via of a response it passes on).
            let refusal = try ProxyTests.proxyFailure(client, wrongPlain.id)
            #expect(refusal.message.contains("refused the credentials of user 'carol'")
                && refusal.httpStatus == (kind == .squid ? 407 : 401), "\(kind): \(refusal)")
            #expect(!daemon.log().contains("carol:wrong"), "the proxy password is never logged")
        }
    }

    /// curl's `--proxytunnel` (`proxyTunnel`): tinyproxy with its stock rules (CONNECT to 443 and 563 only) forwards
    /// a plain http download but refuses to tunnel it (`proxyFailure`, 403); one that allows the origin's port
    /// carries it through a CONNECT; `--no-proxy-tunnel` forwards again.
    @Test func proxyTunnelOnRequest() async throws {
        let stock = try ProxyProcess.tinyproxy(connectPorts: [443, 563])
        defer { stock.stop() }
        let open = try ProxyProcess.tinyproxy()
        defer { open.stop() }
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 2 * MiB, seed: 2931)
            origin.put("/f.bin", body)
            let socket = daemon.socketPath
            let client = try daemon.client()
            _ = try client.openSession("stock", configuration: SessionConfiguration(proxy: stock.url()))
            let forwarded = try client.createTask(TaskCreateParams(session: "stock", url: origin.url("/f.bin"),
                                                                   destination: "f.bin", start: true))
            #expect(try sha256(ofFile: client.waitFor(task: forwarded.id, state: .completed).location!) == TestOrigin.sha256Hex(body))
            #expect(stock.forwarded().contains("GET \(origin.url("/f.bin"))") && stock.tunnels().isEmpty, "\(stock.log())")

            let tunnelled = try ctl(["session", "open", "tunnel", "--proxy", stock.url(), "--proxy-tunnel"], socket: socket)
            #expect(tunnelled.status == 0 && tunnelled.stdout.contains("plain http tunnelled too"), "\(tunnelled.stdout)")
            let refused = try client.createTask(TaskCreateParams(session: "tunnel", url: origin.url("/f.bin"),
                                                                 destination: "refused.bin", start: true))
            let reason = try ProxyTests.proxyFailure(client, refused.id)
            #expect(reason.message.contains("forbids a tunnel to 127.0.0.1:\(origin.port)") && reason.httpStatus == 403, "\(reason)")
            _ = try ctl(["session", "open", "tunnel", "--proxy", open.url()], socket: socket)
            _ = try ctl(["resume", "\(refused.id)"], socket: socket)
            let carried = try client.waitFor(task: refused.id, state: .completed)
            #expect(try sha256(ofFile: carried.location!) == TestOrigin.sha256Hex(body))
            #expect(open.tunnels().contains("CONNECT 127.0.0.1:\(origin.port)") && open.forwarded().isEmpty, "\(open.log())")
            let back = try ctl(["session", "open", "tunnel", "--no-proxy-tunnel"], socket: socket)
            #expect(back.status == 0 && !back.stdout.contains("tunnelled"), "\(back.stdout)")
        }
    }

    /// An https → http redirect (the session allows it) through one HTTP proxy: the https hop goes through a tunnel,
    /// the http one is forwarded (AsyncHTTPClient would have followed it through another tunnel).
    @Test func anHTTPSToHTTPRedirectIsForwarded() async throws {
        let proxy = try ProxyProcess.tinyproxy()
        defer { proxy.stop() }
        try await withSecureOrigin { ca, secure in
            try await withDaemon(["--ca-file", ca.caCertificate]) { daemon, plain in
                let body = TestOrigin.randomBytes(count: 300_000, seed: 2946)
                plain.put("/file.bin", body)
                var down = TestOrigin.Behavior()
                down.redirectTo = plain.url("/file.bin")
                secure.setBehavior("/down", down)
                let client = try daemon.client()
                _ = try client.openSession("down", configuration: SessionConfiguration(allowInsecureRedirects: true,
                                                                                        proxy: proxy.url()))
                let t = try client.createTask(TaskCreateParams(session: "down", url: secure.url("/down"), destination: "f.bin",
                                                               start: true, maxConnections: 1))
                let done = try client.waitFor(task: t.id, state: .completed)
                #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
                #expect(!proxy.tunnels().isEmpty && proxy.tunnels().allSatisfy { $0 == "CONNECT 127.0.0.1:\(secure.port)" },
                        "\(proxy.log())")
                #expect(proxy.forwarded() == ["GET \(plain.url("/file.bin"))"], "\(proxy.log())")
            }
        }
    }

    /// apache2 asking for Digest behind stock tinyproxy: the session's credentials answer it through the forwarding
    /// proxy that asks for its own (the Digest `uri` is the origin-form target apache sees).
    @Test func digestBehindAForwardingProxy() async throws {
        let home = try TempDir()
        let body = TestOrigin.randomBytes(count: 6 * MiB, seed: 2935)
        try AuthenticationTests.put(body, at: "/digest/f.bin", in: home)
        let apache = try AuthenticationTests.apache(home: home)
        defer { apache.stop() }
        let proxy = try ProxyProcess.tinyproxy(basicAuth: ("bob", "proxy-pw"), connectPorts: [443, 563])
        defer { proxy.stop() }
        try await withDaemon { daemon, _ in
            let client = try daemon.client()
            _ = try client.openSession("auth", configuration: SessionConfiguration(
                proxy: proxy.url(user: "bob", password: "proxy-pw"), credentials: AuthenticationTests.alice(at: apache.url())))
            let t = try client.createTask(TaskCreateParams(session: "auth", url: apache.url() + "/digest/f.bin",
                                                           destination: "f.bin", start: true))
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let requests = apache.requests("/digest/f.bin")
            #expect(requests.contains { $0.status == 401 } && requests.contains { $0.status == 200 || $0.status == 206 },
                    "\(apache.log())")
            #expect(proxy.forwarded().contains("GET \(apache.url())/digest/f.bin") && proxy.tunnels().isEmpty, "\(proxy.log())")
        }
    }
}
