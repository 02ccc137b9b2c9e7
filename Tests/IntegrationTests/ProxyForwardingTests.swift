// Plain http forwarded to HTTP proxies (absolute form) through the real binaries: the test origin standing in for a
// proxy, Debian's tinyproxy and squid with their stock access rules, apache2 behind them asking for Digest.
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

    /// tinyproxy with its stock rules (CONNECT to 443 and 563 only): a plain http download is forwarded, split over
    /// several requests, and complete; no tunnel was asked for. With `proxyTunnel` the same proxy refuses the tunnel
    /// (`proxyFailure`, 403); one that allows the origin's port carries it.
    @Test func stockTinyproxyForwardsAndTunnelsOnlyWhenAsked() async throws {
        let stock = try ProxyProcess.tinyproxy(connectPorts: [443, 563])
        defer { stock.stop() }
        let open = try ProxyProcess.tinyproxy()
        defer { open.stop() }
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 6 * MiB, seed: 2931)
            origin.put("/f.bin", body)
            origin.setBehavior("/f.bin", .throttled(2 * MiB))
            let socket = daemon.socketPath
            let opened = try ctl(["session", "open", "stock", "--proxy", stock.url()], socket: socket)
            #expect(opened.status == 0, "\(opened.stderr)")
            var client = try daemon.client()
            let t = try client.createTask(TaskCreateParams(session: "stock", url: origin.url("/f.bin"), destination: "f.bin",
                                                           start: true))
            try SegmentedTests.waitUntilSplit(client, t.id, durable: Int64(1 * MiB))
            daemon.kill9()
            origin.setBehavior("/f.bin", TestOrigin.Behavior())
            try daemon.restart()
            client = try daemon.client()
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let ranged = origin.requests("/f.bin").filter { $0.range != nil }
            #expect(ranged.count >= 2 && ranged.contains { $0.ifRange != nil }, "segments and the resume asked for ranges")
            #expect(origin.requests("/f.bin").allSatisfy { $0.header("Via")?.contains("tinyproxy") == true },
                    "every request came through the proxy")
            #expect(!stock.forwarded().isEmpty && stock.forwarded().allSatisfy { $0 == "GET \(origin.url("/f.bin"))" },
                    "\(stock.log())")
            #expect(stock.tunnels().isEmpty, "\(stock.tunnels())")

            // curl's --proxytunnel: refused by the stock rules, carried by a proxy that allows the port.
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
            // --no-proxy-tunnel forwards again.
            let back = try ctl(["session", "open", "tunnel", "--no-proxy-tunnel"], socket: socket)
            #expect(back.status == 0 && !back.stdout.contains("tunnelled"), "\(back.stdout)")
        }
    }

    /// squid with Debian's stock configuration in front of the test origin: a split download forwarded, kill -9 and
    /// the restart's `Range` + `If-Range` passed through, pause/resume of a file replaced meanwhile (the new version,
    /// whole); https to a port other than 443 is refused by the stock rules (`proxyFailure`, 403).
    @Test func squidWithItsStockRules() async throws {
        let squid = try ProxyProcess.squid()
        defer { squid.stop() }
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 8 * MiB, seed: 2932)
            origin.put("/big.bin", body)
            origin.setBehavior("/big.bin", .throttled(2 * MiB))
            var client = try daemon.client()
            _ = try client.openSession("squid", configuration: SessionConfiguration(proxy: squid.url()))
            let t = try client.createTask(TaskCreateParams(session: "squid", url: origin.url("/big.bin"), destination: "big.bin",
                                                           start: true))
            try SegmentedTests.waitUntilSplit(client, t.id, durable: Int64(1 * MiB))
            daemon.kill9()
            let before = origin.requests("/big.bin").count
            origin.setBehavior("/big.bin", TestOrigin.Behavior())
            try daemon.restart()
            client = try daemon.client()
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let after = Array(origin.requests("/big.bin").dropFirst(before))
            #expect(!after.isEmpty && after.allSatisfy { $0.range != nil && $0.ifRange != nil && $0.status == 206 },
                    "the restart continued with Range + If-Range through squid: \(after.map { ($0.range, $0.status) })")
            #expect(origin.requests("/big.bin").allSatisfy { $0.header("Via")?.contains("squid") == true })
            let logged = try eventually("squid's access log") { () -> [String]? in
                let lines = squid.forwarded()
                return lines.count >= origin.requests("/big.bin").count ? lines : nil
            }
            #expect(logged.allSatisfy { $0 == "GET \(origin.url("/big.bin"))" }, "\(squid.log())")

            // Paused, replaced, resumed: the new version, whole.
            let v1 = TestOrigin.randomBytes(count: 4 * MiB, seed: 2933)
            let v2 = TestOrigin.randomBytes(count: 4 * MiB, seed: 2934)
            origin.put("/changing.bin", v1)
            origin.setBehavior("/changing.bin", .throttled(1 * MiB))
            let c = try client.createTask(TaskCreateParams(session: "squid", url: origin.url("/changing.bin"),
                                                           destination: "changing.bin", start: true))
            try eventually("1 MiB of the first version") { try client.task(c.id).bytesDurable >= Int64(1 * MiB) ? true : nil }
            _ = try client.suspend(c.id)
            origin.put("/changing.bin", v2)
            origin.setBehavior("/changing.bin", TestOrigin.Behavior())
            _ = try client.resume(c.id)
            let changed = try client.waitFor(task: c.id, state: .completed)
            #expect(try sha256(ofFile: changed.location!) == TestOrigin.sha256Hex(v2))
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
                proxy: proxy.url(user: "bob", password: "proxy-pw"), credentials: AuthenticationTests.alice))
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
