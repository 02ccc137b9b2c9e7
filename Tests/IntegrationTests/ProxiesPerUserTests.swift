// One uid's transfers go through at most 16 different proxies at once: through the real binaries, with tinyproxy.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Proxies per user", .serialized)
struct ProxiesPerUserTests {
    /// Opens session `px<i>` for each of `indexes`, each through `proxy` with user `u<i>` (a distinct proxy to the
    /// daemon).
    static func openProxySessions(_ client: HalfTunesClient, _ proxy: ProxyProcess, _ indexes: some Sequence<Int>) throws {
        for i in indexes {
            var config = SessionConfiguration()
            config.proxy = proxy.url(user: "u\(i)", password: "p")
            _ = try client.openSession("px\(i)", configuration: config)
        }
    }

    /// Waits until each task runs and has received bytes.
    static func waitReceiving(_ client: HalfTunesClient, _ ids: [Int64]) throws {
        for id in ids {
            try eventually("task \(id) receiving") {
                let t = try client.task(id)
                if t.state != .running { throw TestFailure("task \(id) is \(t.state.rawValue): \(t.waitingReason?.message ?? "")") }
                return t.bytesReceived > 0 ? true : nil
            }
        }
    }

    /// Sixteen sessions, each with a proxy of its own (one tinyproxy, a different user name in each proxy URL: a
    /// different proxy client for the daemon), each running a paced download; a seventeenth proxy's download waits
    /// queued with `hold.reason` `uidMaxProxies` (it used to start and fail with `proxyFailure`, counting a retry),
    /// while one through a proxy already in use runs; once one of the sixteen is canceled it starts and completes.
    @Test func aSeventeenthProxyWaitsInTheQueueUntilOneIsFree() async throws {
        let proxy = try ProxyProcess.tinyproxy()
        defer { proxy.stop() }
        try await withDaemon(["--max-concurrent", "40", "--max-connections-per-host", "40"]) { daemon, origin in
            let paced = TestOrigin.randomBytes(count: 4 * MiB, seed: 2801)
            origin.put("/paced.bin", paced)
            origin.setBehavior("/paced.bin", .throttled(32 * 1024))
            let last = TestOrigin.randomBytes(count: 300 * 1024, seed: 2802)
            origin.put("/last.bin", last)
            origin.put("/held.bin", last) // its own path: the proxy's log tells its request from the others'
            let client = try daemon.client()
            let limit = 16
            try Self.openProxySessions(client, proxy, 0...limit)
            let running = try (0..<limit).map { i in
                try client.createTask(TaskCreateParams(session: "px\(i)", url: origin.url("/paced.bin"),
                                                       destination: "paced-\(i).bin", start: true, maxConnections: 1)).id
            }
            try Self.waitReceiving(client, running)

            let held = try client.createTask(TaskCreateParams(session: "px\(limit)", url: origin.url("/held.bin"),
                                                              destination: "last.bin", start: true, maxConnections: 1))
            #expect(held.state == .queued, "\(held.state.rawValue) \(held.waitingReason?.message ?? "")")
            #expect(held.hold?.reason == "uidMaxProxies", "\(String(describing: held.hold))")
            #expect(held.hold?.message.contains("16 different proxies") == true, "\(String(describing: held.hold))")
            #expect(held.attempts == 0, "no attempt was used")

            // A proxy already in use is no new one: a second download through px0's starts.
            let same = try client.createTask(TaskCreateParams(session: "px0", url: origin.url("/last.bin"),
                                                              destination: "same.bin", start: true, maxConnections: 1))
            let sameDone = try client.waitFor(task: same.id, state: .completed)
            #expect(try sha256(ofFile: sameDone.location ?? "") == TestOrigin.sha256Hex(last))
            let still = try client.task(held.id)
            #expect(still.state == .queued && still.hold?.reason == "uidMaxProxies" && still.attempts == 0,
                    "\(still.state.rawValue) \(String(describing: still.hold)) \(still.waitingReason?.message ?? "")")

            // One of the sixteen is canceled: its proxy is free once its transfer has stopped, and the held task
            // goes through the seventeenth.
            _ = try client.cancel(running[3])
            let done = try client.waitFor(task: held.id, state: .completed)
            #expect(try sha256(ofFile: done.location ?? "") == TestOrigin.sha256Hex(last))
            #expect(done.attempts == 1, "it started once, and was never refused its proxy")
            #expect(proxy.forwarded().contains("GET \(origin.url("/held.bin"))"), "\(proxy.log())")
            for id in running where id != running[3] { _ = try client.cancel(id) }
        }
    }

    /// A proxy a redirect hop took counts too (the runner reports the engine's leases to the state): fifteen paced
    /// downloads through fifteen proxies, and a sixteenth that starts direct (127.0.0.1 bypassed) and is redirected
    /// to localhost through a sixteenth proxy. A task through a seventeenth then waits queued (`uidMaxProxies`, no
    /// attempt used) instead of being refused its proxy; once the redirected download is canceled it completes.
    @Test func aProxyTakenByARedirectHopCountsToo() async throws {
        let proxy = try ProxyProcess.tinyproxy()
        defer { proxy.stop() }
        try await withDaemon(["--max-concurrent", "40", "--max-connections-per-host", "40"]) { daemon, origin in
            let paced = TestOrigin.randomBytes(count: 4 * MiB, seed: 2803)
            origin.put("/paced.bin", paced)
            origin.setBehavior("/paced.bin", .throttled(32 * 1024))
            var redirect = TestOrigin.Behavior()
            redirect.redirectTo = origin.url("/paced.bin", hostName: "localhost")
            origin.setBehavior("/to-localhost", redirect)
            let body = TestOrigin.randomBytes(count: 200 * 1024, seed: 2804)
            origin.put("/held.bin", body)
            let client = try daemon.client()
            try Self.openProxySessions(client, proxy, 0..<15)
            let running = try (0..<15).map { i in
                try client.createTask(TaskCreateParams(session: "px\(i)", url: origin.url("/paced.bin"),
                                                       destination: "paced-\(i).bin", start: true, maxConnections: 1)).id
            }
            _ = try client.openSession("hop", configuration: SessionConfiguration(
                proxy: proxy.url(user: "u15", password: "p"), proxyBypass: "127.0.0.1"))
            let hop = try client.createTask(TaskCreateParams(session: "hop", url: origin.url("/to-localhost"),
                                                             destination: "hop.bin", start: true, maxConnections: 1))
            try Self.waitReceiving(client, running + [hop.id])
            #expect(proxy.forwarded().contains("GET \(origin.url("/paced.bin", hostName: "localhost"))"), "\(proxy.log())")

            try Self.openProxySessions(client, proxy, [16])
            let held = try client.createTask(TaskCreateParams(session: "px16", url: origin.url("/held.bin"),
                                                              destination: "held.bin", start: true, maxConnections: 1))
            #expect(held.state == .queued && held.hold?.reason == "uidMaxProxies" && held.attempts == 0,
                    "\(held.state.rawValue) \(String(describing: held.hold)) \(held.waitingReason?.message ?? "")")

            _ = try client.cancel(hop.id)
            let done = try client.waitFor(task: held.id, state: .completed)
            #expect(try sha256(ofFile: done.location ?? "") == TestOrigin.sha256Hex(body))
            #expect(done.attempts == 1, "it started once, and was never refused its proxy")
            for id in running { _ = try client.cancel(id) }
        }
    }
}
