// Self-tests of TestOrigin through RawHTTPConnection, a blocking POSIX client (exact control of Range, sees drops).
import Testing
import TestOrigin

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Records an issue when the body differs (a plain `#expect(a == b)` on big arrays makes a failure slow to report).
private func expectBody(
    _ response: RawHTTPResponse, _ want: some Collection<UInt8>, sourceLocation: SourceLocation = #_sourceLocation
) {
    let want = Array(want)
    guard response.body != want else { return }
    var at = 0
    while at < min(response.body.count, want.count), response.body[at] == want[at] { at += 1 }
    Issue.record(
        "body differs: got \(response.body.count) bytes, want \(want.count); first difference at byte \(at)",
        sourceLocation: sourceLocation)
}

/// One request on a fresh connection (closed afterwards).
private func fetch(
    _ origin: TestOrigin, _ path: String, method: String = "GET", _ headers: [(String, String)] = []
) async throws -> RawHTTPResponse {
    let port = origin.port
    return try await RawHTTPConnection.runBlocking {
        let connection = try RawHTTPConnection(port: port)
        try connection.sendRequest(method, path, headers, close: true)
        return try connection.readResponse(isHead: method == "HEAD")
    }
}

@Suite("TestOrigin")
struct TestOriginSelfTests {
    static let size = 300_000

    func withOrigin(_ body: (TestOrigin, [UInt8]) async throws -> Void) async throws {
        let origin = try await TestOrigin.start()
        let bytes = TestOrigin.randomBytes(count: Self.size, seed: 7)
        origin.put("/f", bytes)
        do {
            try await body(origin, bytes)
        } catch {
            try await origin.shutdown()
            throw error
        }
        try await origin.shutdown()
    }

    @Test func fullGetAndRecording() async throws {
        try await withOrigin { origin, bytes in
            #expect(origin.url("/f") == "http://127.0.0.1:\(origin.port)/f")
            let r = try await fetch(origin, "/f")
            #expect(r.status == 200 && r.complete)
            #expect(TestOrigin.sha256Hex(r.body) == TestOrigin.sha256Hex(bytes))
            #expect(r.header("Content-Length") == "\(Self.size)")
            #expect(r.header("Accept-Ranges") == "bytes")
            let etag = try #require(r.header("ETag"))
            #expect(etag == "\"\(TestOrigin.sha256Hex(bytes).prefix(8))-1\"")
            #expect(r.header("Last-Modified")?.hasSuffix(" GMT") == true)
            let recorded = try #require(origin.requests("/f").first)
            #expect(recorded.method == "GET" && recorded.status == 200 && recorded.rangeStart == 0)
            #expect(recorded.bodyBytesSent == Int64(Self.size) && recorded.etag == etag)
            #expect(recorded.headers.contains { $0.name == "Host" && $0.value == "127.0.0.1" })
            #expect(origin.bytesServed("/f") == Int64(Self.size))
            #expect(origin.requests().count == 1)
            #expect(TestOrigin.randomBytes(count: 1000, seed: 7) == Array(bytes[0..<1000]))
        }
    }

    @Test func rangeWithMatchingIfRange() async throws {
        try await withOrigin { origin, bytes in
            let v = try #require(origin.validators("/f"))
            let a = try await fetch(origin, "/f", [("Range", "bytes=100000-"), ("If-Range", v.etag)])
            #expect(a.status == 206 && a.header("Content-Range") == "bytes 100000-299999/300000")
            expectBody(a, bytes[100_000...])
            #expect(a.header("Content-Length") == "200000")
            let b = try await fetch(origin, "/f", [("Range", "bytes=100-199"), ("If-Range", v.lastModified)])
            #expect(b.status == 206 && b.header("Content-Range") == "bytes 100-199/300000")
            expectBody(b, bytes[100...199])
            let c = try await fetch(origin, "/f", [("Range", "bytes=-10")])
            #expect(c.status == 206)
            expectBody(c, bytes.suffix(10))
            #expect(origin.requests("/f").map(\.rangeStart) == [100_000, 100, 299_990])
            #expect(origin.requests("/f").first?.ifRange == v.etag)
            #expect(origin.bytesServed("/f") == 200_000 + 100 + 10)
        }
    }

    @Test func staleIfRangeGivesFullBodyAndChangeGivesNewVersion() async throws {
        try await withOrigin { origin, bytes in
            let old = try #require(origin.validators("/f"))
            let stale = try await fetch(origin, "/f", [("Range", "bytes=1000-"), ("If-Range", "\"nope\"")])
            #expect(stale.status == 200)
            expectBody(stale, bytes)
            let v2 = TestOrigin.randomBytes(count: 5000, seed: 99)
            origin.change("/f", to: v2)
            let new = try #require(origin.validators("/f"))
            #expect(new.etag != old.etag && new.lastModified != old.lastModified)
            let r = try await fetch(origin, "/f", [("Range", "bytes=1000-"), ("If-Range", old.etag)])
            #expect(r.status == 200 && r.header("ETag") == new.etag)
            expectBody(r, v2)
            let r2 = try await fetch(origin, "/f", [("Range", "bytes=1000-"), ("If-Range", old.lastModified)])
            #expect(r2.status == 200)
            expectBody(r2, v2)
        }
    }

    @Test func rangePastEndIs416() async throws {
        try await withOrigin { origin, _ in
            let r = try await fetch(origin, "/f", [("Range", "bytes=300000-")])
            #expect(r.status == 416 && r.header("Content-Range") == "bytes */300000")
            #expect(origin.requests("/f").first?.status == 416)
            #expect(origin.bytesServed("/f") == 0)
        }
    }

    @Test func ignoreRangeAndWrongContentRange() async throws {
        try await withOrigin { origin, bytes in
            var b = TestOrigin.Behavior()
            b.ignoreRange = true
            origin.setBehavior("/f", b)
            let r = try await fetch(origin, "/f", [("Range", "bytes=5000-")])
            #expect(r.status == 200 && r.header("Content-Range") == nil)
            expectBody(r, bytes)
            b = TestOrigin.Behavior()
            b.wrongContentRange = true
            origin.setBehavior("/f", b)
            let w = try await fetch(origin, "/f", [("Range", "bytes=5000-")])
            #expect(w.status == 206 && w.header("Content-Range") == "bytes 3976-299999/300000")
            expectBody(w, bytes[3976...])
        }
    }

    /// `faultsFromRequest` spares the requests to the path before it (a download's first connection).
    @Test func faultsFromRequestSparesTheFirstRequests() async throws {
        try await withOrigin { origin, bytes in
            var b = TestOrigin.Behavior()
            b.faultsFromRequest = 1
            b.failStatus = 503
            b.failTimes = 1
            b.ignoreRange = true
            origin.setBehavior("/f", b)
            let first = try await fetch(origin, "/f", [("Range", "bytes=100-199")])
            #expect(first.status == 206 && first.header("Accept-Ranges") == "bytes")
            expectBody(first, bytes[100..<200])
            let second = try await fetch(origin, "/f", [("Range", "bytes=100-199")])
            #expect(second.status == 503)
            let third = try await fetch(origin, "/f", [("Range", "bytes=100-199")])
            #expect(third.status == 200 && third.header("Accept-Ranges") == nil, "ignoreRange still applies")
            expectBody(third, bytes)
        }
    }

    @Test func dropAfterBytesRespectsDropTimes() async throws {
        try await withOrigin { origin, bytes in
            var b = TestOrigin.Behavior()
            b.dropAfterBytes = 50_000
            b.dropTimes = 2
            origin.setBehavior("/f", b)
            for _ in 0..<2 {
                let r = try await fetch(origin, "/f")
                #expect(r.status == 200 && !r.complete)
                expectBody(r, bytes[0..<50_000])
            }
            let r = try await fetch(origin, "/f")
            #expect(r.status == 200 && r.complete)
            expectBody(r, bytes)
            #expect(origin.requests("/f").map(\.bodyBytesSent) == [50_000, 50_000, 300_000])
            #expect(origin.requests("/f").map(\.truncated) == [true, true, false])
            #expect(origin.behavior("/f").dropTimes == 0)
        }
    }

    @Test func stallThenRelease() async throws {
        try await withOrigin { origin, bytes in
            var b = TestOrigin.Behavior()
            b.stallAfterBytes = 100_000
            origin.setBehavior("/f", b)
            let download = Task { try await fetch(origin, "/f") }
            try await origin.waitUntilBytesServed("/f", atLeast: 100_000)
            #expect(origin.bytesServed("/f") == 100_000)
            origin.releaseStall("/f")
            let r = try await download.value
            #expect(r.status == 200 && r.complete)
            expectBody(r, bytes)
            #expect(origin.bytesServed("/f") == Int64(Self.size))
        }
    }

    @Test func failStatusWithRetryAfter() async throws {
        try await withOrigin { origin, bytes in
            var b = TestOrigin.Behavior()
            b.failStatus = 503
            b.failTimes = 2
            b.retryAfter = "3"
            origin.setBehavior("/f", b)
            for _ in 0..<2 {
                let r = try await fetch(origin, "/f")
                #expect(r.status == 503 && r.header("Retry-After") == "3")
                #expect(r.header("Content-Type") == "text/html" && !r.body.isEmpty)
            }
            let r = try await fetch(origin, "/f")
            #expect(r.status == 200)
            expectBody(r, bytes)
            #expect(origin.requests("/f").map(\.status) == [503, 503, 200])
            #expect(origin.bytesServed("/f") == Int64(Self.size))
        }
    }

    @Test func redirectNotFoundHeadAndKeepAlive() async throws {
        try await withOrigin { origin, bytes in
            var b = TestOrigin.Behavior()
            b.redirectTo = "/f"
            origin.setBehavior("/r", b)
            let r = try await fetch(origin, "/r")
            #expect(r.status == 302 && r.header("Location") == "/f")
            #expect(try await fetch(origin, "/missing").status == 404)
            let port = origin.port
            let (head, get, ranged, closed) = try await RawHTTPConnection.runBlocking {
                let c = try RawHTTPConnection(port: port)
                try c.sendRequest("HEAD", "/f")
                try c.sendRequest("GET", "/f")  // pipelined: answered after the HEAD
                let head = try c.readResponse(isHead: true)
                let get = try c.readResponse()
                try c.sendRequest("GET", "/f", [("Range", "bytes=10-19")], close: true)
                let ranged = try c.readResponse()
                return (head, get, ranged, try c.isClosedByPeer())
            }
            #expect(closed)
            #expect(head.status == 200 && head.header("Content-Length") == "300000" && head.body.isEmpty)
            #expect(get.status == 200)
            expectBody(get, bytes)
            #expect(ranged.status == 206)
            expectBody(ranged, bytes[10...19])
            #expect(origin.requests("/f").map(\.method) == ["HEAD", "GET", "GET"])
            origin.remove("/f")
            #expect(try await fetch(origin, "/f").status == 404)
        }
    }

    @Test func shortBodyChunkedAndNoValidators() async throws {
        try await withOrigin { origin, bytes in
            var b = TestOrigin.Behavior()
            b.shortBody = true
            origin.setBehavior("/f", b)
            let short = try await fetch(origin, "/f")
            #expect(short.header("Content-Length") == "300000" && !short.complete)
            expectBody(short, bytes[0..<150_000])
            b = TestOrigin.Behavior()
            b.omitContentLength = true
            b.omitValidators = true
            origin.setBehavior("/f", b)
            let etag = try #require(origin.validators("/f")?.etag)
            let chunked = try await fetch(origin, "/f", [("Range", "bytes=10-"), ("If-Range", etag)])
            #expect(chunked.status == 200 && chunked.complete)
            expectBody(chunked, bytes)
            #expect(chunked.header("Content-Length") == nil && chunked.header("ETag") == nil)
            #expect(chunked.header("Last-Modified") == nil)
        }
    }

    @Test func throttledBodyWithWaits() async throws {
        try await withOrigin { origin, _ in
            let big = TestOrigin.randomBytes(count: 1 << 20, seed: 3)
            origin.put("/big", big)
            var b = TestOrigin.Behavior()
            b.bytesPerSecond = 512 * 1024
            origin.setBehavior("/big", b)
            let clock = ContinuousClock()
            let started = clock.now
            let download = Task { try await fetch(origin, "/big") }
            try await origin.waitForRequests("/big", count: 1)
            try await origin.waitUntilBytesServed("/big", atLeast: 256 * 1024)
            #expect(origin.bytesServed("/big") >= 256 * 1024)
            let r = try await download.value
            expectBody(r, big)
            #expect(clock.now - started > .seconds(1))
            await #expect(throws: TestOrigin.WaitError.self) {
                try await origin.waitForRequests("/nothing", count: 1, timeout: .milliseconds(100))
            }
        }
    }

    /// The gauge of bodies sent at once: two throttled downloads that overlap count 2, and it goes back to 0
    /// once they end (completed, or the client left).
    @Test func concurrentResponsesAreCounted() async throws {
        try await withOrigin { origin, bytes in
            var b = TestOrigin.Behavior()
            b.bytesPerSecond = 1 << 20
            origin.setBehavior("/f", b)
            #expect(origin.mostConcurrentResponses() == 0)
            async let first = fetch(origin, "/f")
            async let second = fetch(origin, "/f")
            let (r1, r2) = try await (first, second)
            expectBody(r1, bytes)
            expectBody(r2, bytes)
            #expect(origin.mostConcurrentResponses("/f") == 2 && origin.mostConcurrentResponses() == 2)
            #expect(origin.mostConcurrentResponses("/other") == 0)
            #expect(origin.concurrentResponses() == 0 && origin.concurrentResponses("/f") == 0)
        }
    }

    @Test func clientDisconnectStopsTheBody() async throws {
        try await withOrigin { origin, _ in
            var b = TestOrigin.Behavior()
            b.bytesPerSecond = 256 * 1024
            origin.setBehavior("/f", b)
            let port = origin.port
            try await RawHTTPConnection.runBlocking {
                let c = try RawHTTPConnection(port: port)
                try c.sendRequest("GET", "/f")
                try c.readRaw(atLeast: 20_000)
            }  // the connection is closed here
            let deadline = ContinuousClock.now + .seconds(30)
            while origin.requests("/f").first?.truncated != true, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            let recorded = try #require(origin.requests("/f").first)
            #expect(recorded.truncated && recorded.status == 200)
            #expect(recorded.bodyBytesSent >= 19_000 && recorded.bodyBytesSent < Int64(Self.size))
            #expect(origin.bytesServed("/f") == recorded.bodyBytesSent)
        }
    }

    @Test func shutdownLeavesNoThreadOrSocket() async throws {
        let origin = try await TestOrigin.start()
        origin.put("/f", TestOrigin.randomBytes(count: Self.size, seed: 1))
        var b = TestOrigin.Behavior()
        b.stallAfterBytes = 1000
        origin.setBehavior("/f", b)
        let port = origin.port
        let stalled = Task { try await fetch(origin, "/f") }
        try await origin.waitUntilBytesServed("/f", atLeast: 1000)
        let sockets = openSockets(localPort: port)
        #expect(sockets.count >= 2)  // the listener and the stalled connection
        let tid = try #require(origin.eventLoopThreadID)
        #expect(firstLine("/proc/self/task/\(tid)/comm")?.hasPrefix("NIO-ELT-") == true)
        try await origin.shutdown()
        let r = try await stalled.value
        #expect(!r.complete && r.body.count == 1000)
        #expect(openSockets(localPort: port).isDisjoint(with: sockets))
        // pthread_join returns a moment before the kernel drops the exited thread's /proc entry.
        let deadline = ContinuousClock.now + .seconds(10)
        while access("/proc/self/task/\(tid)", F_OK) == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(1))
        }
        #expect(access("/proc/self/task/\(tid)", F_OK) != 0, "event loop thread \(tid) still exists")
        try await origin.shutdown()  // a second call does nothing
    }
}

private func firstLine(_ path: String) -> String? {
    guard let f = fopen(path, "r") else { return nil }
    defer { fclose(f) }
    var buffer = [CChar](repeating: 0, count: 256)
    guard fgets(&buffer, Int32(buffer.count), f) != nil else { return nil }
    return String(decoding: buffer.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Inodes of sockets held open by this process whose local TCP port is `localPort` (Linux; empty elsewhere).
private func openSockets(localPort: Int) -> Set<String> {
    func lines(_ path: String) -> [Substring] {
        guard let f = fopen(path, "r") else { return [] }
        defer { fclose(f) }
        var out: [Substring] = []
        var buffer = [CChar](repeating: 0, count: 1024)
        while fgets(&buffer, Int32(buffer.count), f) != nil {
            out.append(Substring(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)))
        }
        return out
    }
    var portInodes = Set<String>()
    for line in lines("/proc/net/tcp").dropFirst() {
        let fields = line.split(separator: " ")
        guard fields.count > 9, let port = fields[1].split(separator: ":").last.flatMap({ Int($0, radix: 16) }),
            port == localPort
        else { continue }
        portInodes.insert(String(fields[9]))
    }
    var mine = Set<String>()
    guard let dir = opendir("/proc/self/fd") else { return [] }
    defer { closedir(dir) }
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        var link = [CChar](repeating: 0, count: 256)
        let n = readlink("/proc/self/fd/\(name)", &link, 255)
        guard n > 0 else { continue }
        let target = String(decoding: link[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if target.hasPrefix("socket:["), portInodes.contains(String(target.dropFirst(8).dropLast())) {
            mine.insert(target)
        }
    }
    return mine
}
