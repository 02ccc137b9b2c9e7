// How the daemon classifies what goes wrong: HTTP statuses, DNS failures and connection resets, end to end.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// docs/protocol.md "Failures, retries and resumes" and "TaskError codes", through the real daemon: transient
/// failures wait with the documented code and retry; permanent ones fail at once and leave no data behind.
@Suite("Retry classification")
struct RetryClassificationTests {
    /// 408 and 504 wait with `timedOut`, 500 and 502 with `httpStatus` (each with its `httpStatus`), then the
    /// retry (50 ms later) completes with the origin's bytes.
    @Test func transientStatusesWaitWithTheDocumentedCodeAndThenComplete() async throws {
        try await withDaemon { daemon, origin in
            let cases: [(status: Int, code: String)] = [
                (408, TaskErrorCode.timedOut), (500, TaskErrorCode.httpStatus),
                (502, TaskErrorCode.httpStatus), (504, TaskErrorCode.timedOut),
            ]
            var bodies: [Int: [UInt8]] = [:]
            for (i, c) in cases.enumerated() {
                let body = TestOrigin.randomBytes(count: 300_000 + i, seed: 700 + UInt64(i))
                bodies[c.status] = body
                origin.put("/s\(c.status).bin", body)
                var fail = TestOrigin.Behavior()
                fail.failStatus = c.status
                fail.failTimes = 1
                origin.setBehavior("/s\(c.status).bin", fail)
            }
            let client = try daemon.client()
            let events = try client.openHostileSession(
                "transient", retry: RetryPolicy(initialDelay: 0.05, maxDelay: 0.1, jitter: 0))
            let tasks = try cases.map { try client.startTask(origin.url("/s\($0.status).bin"), session: "transient") }
            for (c, t) in zip(cases, tasks) {
                let done = try client.waitFor(task: t.id, state: .completed)
                try events.waitForDidComplete(t.id)
                #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(bodies[c.status]!), "\(c.status)")
                let reasons = events.waitingReasons(task: t.id)
                #expect(reasons.map(\.code) == [c.code], "\(c.status): \(reasons)")
                #expect(reasons.map(\.httpStatus) == [c.status])
                #expect(origin.requests("/s\(c.status).bin").map(\.status) == [c.status, 200])
                #expect(done.attempts == 2)
                #expect(done.error == nil)
            }
            #expect(partialFiles(in: daemon.downloadsDir).isEmpty)
        }
    }

    /// 403, 410 and 501 fail at once (no retry) with `httpStatus`. Each task first holds partial data (a drop
    /// made it wait; its retry is an hour away), so "fails and deletes its partial data" is seen, not assumed.
    @Test func permanentStatusesFailAtOnceAndDeleteThePartialFile() async throws {
        try await withDaemon { daemon, origin in
            let client = try daemon.client()
            let events = try client.openHostileSession("permanent", retry: RetryPolicy(initialDelay: 3600, jitter: 0))
            for status in [403, 410, 501] {
                let path = "/p\(status).bin"
                origin.put(path, TestOrigin.randomBytes(count: 500_000, seed: 710 + UInt64(status)))
                var drop = TestOrigin.Behavior()
                drop.dropAfterBytes = 200_000
                origin.setBehavior(path, drop)
                let t = try client.startTask(origin.url(path), session: "permanent")
                let waiting = try client.waitFor(task: t.id, state: .waiting)
                #expect(waiting.bytesDurable == 200_000)
                #expect(partialFiles(in: daemon.downloadsDir).count == 1, "the drop left partial data")

                var fail = TestOrigin.Behavior()
                fail.failStatus = status
                fail.failTimes = 1000
                origin.setBehavior(path, fail)
                _ = try client.resume(t.id) // retry now
                let end = try client.waitForEnd(t.id)
                try events.waitForDidComplete(t.id)
                #expect(end.state == .failed, "\(status)")
                #expect(end.error?.code == TaskErrorCode.httpStatus, "\(status): \(end.error?.message ?? "")")
                #expect(end.error?.httpStatus == status)
                #expect(end.attempts == 2, "\(status) is not retried")
                #expect(origin.requests(path).map(\.status) == [200, status])
                #expect(events.waitingReasons(task: t.id).map(\.code) == [TaskErrorCode.connectionLost])
                #expect(!FileManager.default.fileExists(atPath: end.destination), "\(end.destination)")
                #expect(partialFiles(in: daemon.downloadsDir).isEmpty, "\(status): partial data deleted")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.downloadsDir).isEmpty)
        }
    }

    /// A host that cannot resolve (`.invalid` is reserved, RFC 6761) waits with `dnsFailure`. On this machine
    /// resolving it fails at once (no network, NXDOMAIN from files+dns), so no timeout is needed to see it.
    @Test func anUnresolvableHostWaitsWithDNSFailure() async throws {
        try await withDaemon { daemon, _ in
            let client = try daemon.client()
            let events = try client.openHostileSession("dns", retry: RetryPolicy(initialDelay: 3600, jitter: 0))
            let t = try client.startTask("http://no-such-host.invalid/x", session: "dns")
            let waiting = try client.waitFor(task: t.id, state: .waiting, timeout: 30)
            let reason = try #require(waiting.waitingReason)
            #expect(reason.code == TaskErrorCode.dnsFailure, "\(reason)")
            #expect(reason.httpStatus == nil)
            #expect(reason.message.contains("no-such-host.invalid"), "\(reason.message)")
            #expect(waiting.attempts == 1)
            #expect(waiting.bytesReceived == 0)
            #expect(waiting.nextAttemptAt != nil)
            try eventually("the move to waiting to be recorded") { events.waitingReasons(task: t.id).isEmpty ? nil : true }
            #expect(events.waitingReasons(task: t.id).map(\.code) == [TaskErrorCode.dnsFailure])
            #expect(!FileManager.default.fileExists(atPath: waiting.destination))
            _ = try client.cancel(t.id)
        }
    }

    /// The origin resets the connection (RST) mid-body twice. Each time the task waits with `connectionLost`
    /// and keeps its durable bytes; the retry asks for exactly `Range: bytes=<bytesDurable>-` with If-Range, and
    /// the file completes byte for byte.
    @Test func aResetMidBodyResumesFromTheDurableOffset() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 2 * MiB + 11, seed: 720)
            origin.put("/reset.bin", body)
            var reset = TestOrigin.Behavior()
            reset.resetAfterBytes = 400_000
            reset.resetTimes = 2
            origin.setBehavior("/reset.bin", reset)
            let client = try daemon.client()
            // Retries an hour away: each waiting state is looked at, then `task.resume` retries at once.
            let events = try client.openHostileSession("reset", retry: RetryPolicy(initialDelay: 3600, jitter: 0))
            let t = try client.startTask(origin.url("/reset.bin"), session: "reset")
            let etag = try #require(origin.validators("/reset.bin")?.etag)
            var durable: [Int64] = []
            for round in 1...2 {
                let waiting = try client.waitFor(task: t.id, state: .waiting)
                #expect(waiting.waitingReason?.code == TaskErrorCode.connectionLost, "\(String(describing: waiting.waitingReason))")
                #expect(waiting.bytesDurable == waiting.bytesReceived)
                let previous = durable.last ?? 0
                #expect(waiting.bytesDurable > previous, "round \(round): progress was kept")
                #expect(waiting.bytesDurable <= previous + 400_000, "round \(round): no more than was sent")
                durable.append(waiting.bytesDurable)
                _ = try client.resume(t.id)
            }
            let done = try client.waitFor(task: t.id, state: .completed)
            try events.waitForDidComplete(t.id)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let requests = origin.requests("/reset.bin")
            #expect(requests.map(\.truncated) == [true, true, false])
            #expect(requests.map(\.range) == [nil] + durable.map { "bytes=\($0)-" })
            #expect(requests.dropFirst().allSatisfy { $0.ifRange == etag && $0.status == 206 })
            #expect(events.waitingReasons(task: t.id).map(\.code) == [TaskErrorCode.connectionLost, TaskErrorCode.connectionLost])
            #expect(events.resumes(task: t.id).map(\.offset) == durable)
            #expect(done.attempts == 3)
            #expect(partialFiles(in: daemon.downloadsDir).isEmpty)
        }
    }

    /// The origin's reset is a real RST: a plain client's recv(2) fails with ECONNRESET (a FIN would read as EOF).
    @Test func theOriginsResetIsATCPReset() async throws {
        let origin = try await TestOrigin.start()
        do {
            try await Self.resetOnce(origin)
        } catch {
            try? await origin.shutdown()
            throw error
        }
        try await origin.shutdown()
    }

    static func resetOnce(_ origin: TestOrigin) async throws {
        origin.put("/r", TestOrigin.randomBytes(count: 300_000, seed: 721))
        var reset = TestOrigin.Behavior()
        reset.resetAfterBytes = 1000
        origin.setBehavior("/r", reset)
        let port = origin.port
        let outcome = try await RawHTTPConnection.runBlocking { () -> String in
            let connection = try RawHTTPConnection(port: port)
            try connection.sendRequest("GET", "/r", close: true)
            do {
                let response = try connection.readResponse()
                return "a response of \(response.body.count) bytes, complete: \(response.complete)"
            } catch {
                return "\(error)"
            }
        }
        #expect(outcome.contains("errno \(ECONNRESET)"), "\(outcome)")
        #expect(origin.requests("/r").map(\.truncated) == [true])
        #expect(origin.behavior("/r").resetTimes == 0)
    }
}
