// Forwarded requests (plain http to an HTTP proxy, absolute form) through the engine: the test origin stands in for
// the proxy; the fixture's one event loop makes every attempt use the same connection pool.
import AsyncHTTPClient
@testable import HalfTunesCore
@testable import HalfTunesEngine
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite struct ForwardedTransferTests {
    static func proxied(_ f: EngineFixture) -> (ProxyRules, ProxyForwarder) {
        let proxy = ProxyServer(kind: .http, host: "127.0.0.1", port: f.origin.port)
        return (ProxyRules(all: proxy, bypass: .none, source: "test"), ProxyForwarder(proxy: proxy))
    }

    static func attempt(_ f: EngineFixture, _ request: AttemptRequest, _ forwarder: ProxyForwarder,
                        _ observer: RecordingObserver) -> Attempt {
        Attempt(request: request, clients: FixedClient(f.client, forwarder: forwarder), observer: observer, logger: f.logger)
    }

    /// A download held back by a bandwidth limit (body parts acknowledged late, so reads are held) ends and leaves
    /// its connection ready: the next attempt's request goes on the same connection and gets its answer.
    @Test func aThrottledDownloadLeavesItsConnectionReadyForTheNext() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 1 << 20, seed: 2944)
            f.origin.put("/t.bin", body)
            let (rules, forwarder) = Self.proxied(f)
            defer { forwarder.close() }
            for i in 0..<3 {
                let partial = f.dir.path("t\(i)")
                var request = AttemptRequest.download(taskID: Int64(i), url: "http://files.invalid/t.bin",
                                                      partialPath: partial, requestTimeout: 10)
                request.proxyRules = rules
                if i < 2 { request.rateLimiter = RateLimiter(buckets: [BandwidthBucket(rate: 4 << 20)]) }
                let outcome = await Self.attempt(f, request, forwarder, RecordingObserver(partialPath: partial)).run()
                guard case .completed = outcome else {
                    Issue.record("attempt \(i): \(outcome)")
                    return
                }
                let written = try readFile(partial)
                #expect(written == body)
            }
            let requests = f.origin.requests("/t.bin")
            #expect(requests.count == 3 && requests.allSatisfy { $0.uri == "http://files.invalid/t.bin" }, "\(requests.map(\.uri))")
            #expect(Set(requests.map(\.connection)).count == 1, "each request reused the first's connection")
        }
    }

    /// A forwarded download stopped mid-transfer keeps what arrived; the next attempt resumes it through the proxy
    /// with `Range` + `If-Range`, and the file is whole.
    @Test func stoppedAndResumedThroughTheProxy() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 4 << 20, seed: 2945)
            f.origin.put("/s.bin", body)
            var slow = TestOrigin.Behavior()
            slow.bytesPerSecond = 1 << 20
            f.origin.setBehavior("/s.bin", slow)
            let (rules, forwarder) = Self.proxied(f)
            defer { forwarder.close() }
            let partial = f.dir.path("s")
            var request = AttemptRequest.download(taskID: 1, url: "http://files.invalid/s.bin", partialPath: partial,
                                                  checkpointInterval: 0.05)
            request.proxyRules = rules
            let first = Self.attempt(f, request, forwarder, RecordingObserver(partialPath: partial))
            let running = Task { await first.run() }
            try await waitUntil("some of the file served", stopping: first, running) { f.origin.bytesServed("/s.bin") > 256 << 10 }
            first.stop()
            guard case .stopped(let durable) = await running.value, durable.count > 0 else {
                Issue.record("not stopped with data kept")
                return
            }
            f.origin.setBehavior("/s.bin", TestOrigin.Behavior())
            let (etag, lastModified) = try #require(f.origin.validators("/s.bin"))
            var again = AttemptRequest.download(taskID: 1, url: "http://files.invalid/s.bin", partialPath: partial,
                                                durable: durable, validators: Validators(etag: etag, lastModified: lastModified))
            again.proxyRules = rules
            let outcome = await Self.attempt(f, again, forwarder, RecordingObserver(partialPath: partial)).run()
            guard case .completed = outcome else {
                Issue.record("resume: \(outcome)")
                return
            }
            let written = try readFile(partial)
            #expect(written == body)
            let resumed = try #require(f.origin.requests("/s.bin").last)
            #expect(resumed.range != nil && resumed.ifRange == etag && resumed.status == 206, "\(resumed.range ?? "-") \(resumed.status)")
            #expect(resumed.uri == "http://files.invalid/s.bin")
        }
    }

    /// A split download reached through a redirect, whose further request is refused (416: another version): the
    /// one request that starts over asks where the first response came from (the redirect's target, forwarded),
    /// not the redirecting URL (which a further request on this path would not follow), and the file is whole.
    @Test func aRestartFromZeroAsksTheRedirectsTarget() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 16 << 20, seed: 2949)
            f.origin.put("/c.bin", body)
            var slow = TestOrigin.Behavior()
            slow.bytesPerSecond = 4 << 20
            slow.refuseRangeTimes = 1
            f.origin.setBehavior("/c.bin", slow)
            var hop = TestOrigin.Behavior()
            hop.redirectTo = "/c.bin"
            f.origin.setBehavior("/r", hop)
            let (rules, forwarder) = Self.proxied(f)
            defer { forwarder.close() }
            let partial = f.dir.path("c")
            var request = AttemptRequest.download(taskID: 1, url: "http://files.invalid/r", partialPath: partial,
                                                  durable: ByteRanges(), maxConnections: 4)
            request.proxyRules = rules
            let observer = RecordingObserver(partialPath: partial)
            observer.setAllowance(nil)
            let outcome = await Self.attempt(f, request, forwarder, observer).run()
            guard case .completed = outcome else {
                Issue.record("\(outcome)")
                return
            }
            let written = try readFile(partial)
            #expect(written == body)
            #expect(observer.snapshot.starts.last?.reason == "resourceChanged", "\(observer.snapshot.starts)")
            #expect(f.origin.requests("/c.bin").contains { $0.status == 416 })
            #expect(f.origin.requests("/r").count == 1, "the restart did not ask the redirecting URL again")
        }
    }
}
