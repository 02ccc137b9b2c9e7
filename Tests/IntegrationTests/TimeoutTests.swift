// The session's two timeouts end to end: the idle requestTimeout (reset by every byte) and the resourceTimeout.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Seconds elapsed since `start` on a monotonic clock.
func seconds(since start: ContinuousClock.Instant) -> Double {
    let d = ContinuousClock.now - start
    return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
}

/// Seconds since 1970 of a wire timestamp.
func epochSeconds(_ timestamp: String) throws -> Double {
    try #require(Formatting.parseTimestamp(timestamp), "unparsable timestamp \(timestamp)")
}

@Suite("Timeouts")
struct TimeoutTests {
    /// requestTimeout 0.5 s is an idle timeout: a body that trickles in steadily for about 3 s (600 KB at 200 KB/s,
    /// a slice every 15 ms) completes in one request and never waits. A stall with the same timeout waits with
    /// `timedOut` no sooner than 0.5 s after the last byte.
    @Test func theIdleTimeoutIsResetByEveryByteButAStallHitsIt() async throws {
        try await withDaemon { daemon, origin in
            let slow = TestOrigin.randomBytes(count: 600_000, seed: 730)
            origin.put("/slow.bin", slow)
            origin.setBehavior("/slow.bin", .throttled(200_000))
            let stalled = TestOrigin.randomBytes(count: 500_000, seed: 731)
            origin.put("/stall.bin", stalled)
            origin.setBehavior("/stall.bin", .stalled(after: 100_000))
            let client = try daemon.client()
            let events = try client.openHostileSession("idle", retry: RetryPolicy(initialDelay: 3600, jitter: 0),
                                                       requestTimeout: 0.5)
            #expect(try client.session("idle").configuration.requestTimeout == 0.5)

            let started = ContinuousClock.now
            let t = try client.startTask(origin.url("/slow.bin"), session: "idle")
            let done = try client.waitFor(task: t.id, state: .completed, timeout: 30)
            let elapsed = seconds(since: started)
            try events.waitForDidComplete(t.id)
            #expect(elapsed > 2.0, "the body took \(elapsed) s: more than 4 × the 0.5 s timeout, so it was really slow")
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(slow))
            #expect(origin.requests("/slow.bin").count == 1)
            #expect(done.attempts == 1)
            #expect(events.waitingReasons(task: t.id).isEmpty)

            let s = try client.startTask(origin.url("/stall.bin"), session: "idle")
            let waiting = try client.waitFor(task: s.id, state: .waiting, timeout: 30)
            let reason = try #require(waiting.waitingReason)
            #expect(reason.code == TaskErrorCode.timedOut, "\(reason)")
            #expect(reason.message.contains("within the request timeout"), "\(reason.message)")
            #expect(waiting.bytesDurable == 100_000)
            let request = try #require(origin.requests("/stall.bin").first)
            let idle = try epochSeconds(waiting.updatedAt) - request.arrivedAt
            #expect(idle >= 0.5 && idle < 10, "waited \(idle) s after the request for a 0.5 s idle timeout")
            #expect(origin.requests("/stall.bin").count == 1)
            _ = try client.cancel(s.id)
            origin.releaseStall("/stall.bin")
        }
    }

    /// resourceTimeout 1.5 s: a task that only ever gets 503 (Retry-After: 0) and one stalled mid-body both fail
    /// with `resourceTimeout` once it passes, leaving no partial file and nothing at the destination. A task
    /// suspended (with partial data) before them is past its deadline too, but does not fail while suspended.
    @Test func theResourceTimeoutFailsPendingTasksButNotSuspendedOnes() async throws {
        try await withDaemon { daemon, origin in
            for name in ["busy", "stall", "paused"] {
                origin.put("/\(name).bin", TestOrigin.randomBytes(count: 500_000, seed: 740))
            }
            var busy = TestOrigin.Behavior()
            busy.failStatus = 503
            busy.failTimes = 1_000_000
            busy.retryAfter = "0"
            origin.setBehavior("/busy.bin", busy)
            var stall = TestOrigin.Behavior()
            stall.stallAfterBytes = 200_000
            origin.setBehavior("/stall.bin", stall)
            origin.setBehavior("/paused.bin", stall)
            let client = try daemon.client()
            _ = try client.openSession("deadline", configuration: SessionConfiguration(
                resourceTimeout: 1.5, retry: RetryPolicy(initialDelay: 0.05, maxDelay: 0.1, jitter: 0)))
            let events = try EventRecorder(client: client, session: "deadline", after: 0)
            func start(_ name: String) throws -> TaskInfo {
                try client.createTask(TaskCreateParams(session: "deadline", url: origin.url("/\(name).bin"),
                                                       destination: "\(name).bin", start: true))
            }
            // Created first, so its deadline passes before the others'; suspended with the bytes before the stall.
            let p = try start("paused")
            try await origin.waitUntilBytesServed("/paused.bin", atLeast: 200_000)
            let suspended = try client.suspend(p.id)
            #expect(suspended.state == .suspended)
            let kept = try client.task(p.id).bytesReceived
            #expect(kept > 0)

            let b = try start("busy")
            let s = try start("stall")
            try await origin.waitUntilBytesServed("/stall.bin", atLeast: 200_000)
            #expect(try client.task(s.id).state == .running)
            #expect(partialFiles(in: daemon.downloadsDir).count == 3)

            // The busy task gives up as soon as its next retry (at most 0.1 s away) would start after the deadline;
            // the stalled one fails on the first once-a-second check past it.
            for (t, earliest, message) in [(b, 1.5 - 0.1 - 0.01, "Gave up: the resource timeout ends before the next retry"),
                                           (s, 1.5 - 0.01, "did not finish within the session's resource timeout")] {
                let end = try client.waitForEnd(t.id, timeout: 30)
                try events.waitForDidComplete(t.id)
                #expect(end.state == .failed)
                #expect(end.error?.code == TaskErrorCode.resourceTimeout, "\(end.error?.message ?? "")")
                #expect(end.error?.message.contains(message) == true, "\(end.error?.message ?? "")")
                let lasted = try epochSeconds(end.updatedAt) - epochSeconds(end.createdAt)
                #expect(lasted >= earliest && lasted < 5, "failed \(lasted) s after creation, with a 1.5 s resource timeout")
                #expect(!FileManager.default.fileExists(atPath: end.destination))
            }
            let busyRequests = origin.requests("/busy.bin")
            #expect(busyRequests.count >= 3 && busyRequests.allSatisfy { $0.status == 503 }, "\(busyRequests.count)")
            #expect(Set(events.waitingReasons(task: b.id).map(\.code)) == [TaskErrorCode.serverBusy])
            #expect(origin.requests("/stall.bin").count == 1)
            #expect(events.waitingReasons(task: s.id).isEmpty, "the stalled transfer was running until the deadline")

            // The suspended task's deadline passed before the others' (checked on the same tick): still suspended,
            // its data kept. Only the two failed tasks' partial files are gone.
            let still = try client.task(p.id)
            #expect(still.state == .suspended)
            #expect(still.bytesReceived == kept)
            #expect(still.error == nil)
            // A failed task's partial goes once its stopped transfer has ended, which may be after its didComplete.
            try eventually("the failed tasks' partial files removed") {
                partialFiles(in: daemon.downloadsDir).count == 1 ? true : nil
            }
            #expect(partialFiles(in: daemon.downloadsDir).map { $0.hasPrefix(".paused.bin.") } == [true])
            #expect(origin.requests("/paused.bin").count == 1)
        }
    }

    /// While a transfer stalls, `task.get` still shows every byte received: once the 200 000 bytes before the
    /// stall are durable (the 1 s checkpoint), `bytesReceived` is not behind `bytesDurable`, and the
    /// `didWriteData` events have reported them too.
    @Test func aStalledTransferReportsEveryByteItReceived() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 500_000, seed: 760)
            origin.put("/stall.bin", body)
            var stall = TestOrigin.Behavior()
            stall.stallAfterBytes = 200_000
            stall.stallTimes = 1
            origin.setBehavior("/stall.bin", stall)
            let client = try daemon.client()
            let events = try client.openHostileSession("stalled")
            let t = try client.startTask(origin.url("/stall.bin"), session: "stalled")
            let durable = try eventually("the bytes before the stall to be durable", timeout: 10) { () -> TaskInfo? in
                let info = try client.task(t.id)
                return info.bytesDurable == 200_000 ? info : nil
            }
            #expect(durable.state == .running)
            #expect(durable.bytesReceived == 200_000, "bytesReceived \(durable.bytesReceived) is behind bytesDurable 200000")
            try events.wait(for: "didWriteData up to 200000", timeout: 5) { event in
                guard event.task == t.id, case .didWriteData(_, let total, _) = event.payload else { return false }
                return total == 200_000
            }
            origin.releaseStall("/stall.bin")
            let done = try client.waitFor(task: t.id, state: .completed, timeout: 30)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            #expect(origin.requests("/stall.bin").count == 1)
        }
    }
}
