import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Checksums, header checks, priorities and queue moves, through the real daemon and CLI.
@Suite("Controls: checksums, headers, priorities")
struct ControlsTests {
    @Test func aMatchingChecksumPublishesAndAMismatchNeverDoes() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 3 * MiB + 7, seed: 401)
            origin.put("/good.bin", body)
            origin.put("/bad.bin", body)
            let good = try ctl(["download", origin.url("/good.bin"), "--sha256", TestOrigin.sha256Hex(body).uppercased(),
                                "--wait"], socket: daemon.socketPath)
            #expect(good.status == 0, "\(good.stdout) \(good.stderr)")
            #expect(try sha256(ofFile: daemon.downloadsDir + "/good.bin") == TestOrigin.sha256Hex(body))

            let wrong = TestOrigin.sha256Hex(Array(body.dropLast()))
            let bad = try ctl(["download", origin.url("/bad.bin"), "--sha256", wrong, "--wait"], socket: daemon.socketPath)
            #expect(bad.status == 1, "\(bad.stdout) \(bad.stderr)")
            let client = try daemon.client()
            let failed = try #require(try client.tasks().first { $0.url.hasSuffix("/bad.bin") })
            #expect(failed.state == .failed)
            #expect(failed.checksum == "sha256:" + wrong)
            let error = try #require(failed.error)
            #expect(error.code == TaskErrorCode.checksumMismatch)
            #expect(error.message.contains(wrong) && error.message.contains(TestOrigin.sha256Hex(body)))
            #expect(!FileManager.default.fileExists(atPath: daemon.downloadsDir + "/bad.bin"))
            #expect(failed.location == nil)
            #expect(partialFiles(in: daemon.downloadsDir).isEmpty)
        }
    }

    @Test func badChecksumsAreRefusedAtCreation() async throws {
        try await withDaemon { daemon, origin in
            let client = try daemon.client()
            _ = try client.openSession("sums")
            for bad in ["sha256:abc", "md5:" + String(repeating: "0", count: 64), String(repeating: "0", count: 64)] {
                let code = rpcCode { _ = try client.createTask(TaskCreateParams(session: "sums", url: origin.url("/x"), checksum: bad)) }
                #expect(code == .invalidParams, "\(bad)")
            }
            let cli = try ctl(["download", origin.url("/x"), "--sha256", "12ab"], socket: daemon.socketPath)
            #expect(cli.status == 2)
            #expect(cli.stderr.contains("64 hex digits"))
            #expect(try client.tasks().isEmpty)
        }
    }

    /// kill -9 while the digest is computed: the restarted daemon verifies again (after a 416 for the complete
    /// range) and never publishes the unverified file.
    @Test func aCrashDuringVerificationNeverPublishesUnverifiedData() async throws {
        let origin = try await TestOrigin.start()
        let daemon = try DaemonProcess(start: false)
        defer { daemon.kill9(); daemon.dir.remove() }
        daemon.environment = ["HALFTUNES_CRASH_AT": "checksum.verifying"]
        try daemon.start()
        let body = TestOrigin.randomBytes(count: 2 * MiB, seed: 402)
        origin.put("/v.bin", body)
        var client = try daemon.client()
        _ = try client.openSession("v")
        let wrong = "sha256:" + String(repeating: "ab", count: 32)
        let t = try client.createTask(TaskCreateParams(session: "v", url: origin.url("/v.bin"), start: true, checksum: wrong))
        try eventually("the daemon to crash while verifying") { daemon.isRunning ? nil : true }
        #expect(!FileManager.default.fileExists(atPath: daemon.downloadsDir + "/v.bin"))
        daemon.environment = [:]
        try daemon.restart()
        client = try daemon.client()
        let done = try eventually("task \(t.id) to fail") { () -> TaskInfo? in
            let info = try client.task(t.id)
            return info.state.isTerminal ? info : nil
        }
        #expect(done.state == .failed)
        #expect(done.error?.code == TaskErrorCode.checksumMismatch)
        #expect(!FileManager.default.fileExists(atPath: daemon.downloadsDir + "/v.bin"))
        #expect(partialFiles(in: daemon.downloadsDir).isEmpty)
        let requests = origin.requests("/v.bin")
        #expect(requests.count == 2)
        #expect(requests.last?.status == 416) // it already had every byte: nothing downloaded twice
        try await origin.shutdown()
    }

    /// CR, LF, NUL (and other control characters) in a header name or value are refused, per task and per
    /// session; good headers reach the origin.
    @Test func headersWithLineBreaksOrNULAreRefused() async throws {
        try await withDaemon { daemon, origin in
            origin.put("/h", TestOrigin.randomBytes(count: 100, seed: 403))
            let client = try daemon.client()
            _ = try client.openSession("h")
            let bad: [[String: String]] = [
                ["X-A": "a\r\nInjected: 1"], ["X-A": "a\nb"], ["X-A": "a\rb"], ["X-A": "a\u{0}b"], ["X-A": "a\u{1}b"],
                ["X-A\r\nInjected": "1"], ["X A": "1"], ["X-\u{0}": "1"],
            ]
            for headers in bad {
                #expect(rpcCode { _ = try client.createTask(TaskCreateParams(session: "h", url: origin.url("/h"), headers: headers)) }
                    == .invalidParams, "task headers \(headers)")
                #expect(rpcCode { _ = try client.openSession("h2", configuration: SessionConfiguration(headers: headers)) }
                    == .invalidParams, "session headers \(headers)")
            }
            #expect(try client.tasks().isEmpty)
            #expect(try client.sessions().map(\.identifier) == ["h"])
            _ = try client.openSession("h", configuration: SessionConfiguration(headers: ["X-Session": "s\tv"]))
            let t = try client.createTask(TaskCreateParams(session: "h", url: origin.url("/h"), headers: ["X-Task": "t"], start: true))
            try client.waitFor(task: t.id, state: .completed)
            let request = try #require(origin.requests("/h").first)
            #expect(request.header("X-Session") == "s\tv" && request.header("X-Task") == "t")
        }
    }

    /// With one transfer slot busy: high before normal before low, FIFO within a priority; `move --to-front`
    /// and `set --priority` re-sort at once; the order survives a restart.
    @Test func prioritiesAndMovesOrderTheQueueAcrossARestart() async throws {
        try await withDaemon(["--max-concurrent", "1"]) { daemon, origin in
            for name in ["first", "low", "n1", "high", "n2"] {
                origin.put("/\(name)", TestOrigin.randomBytes(count: 64 << 10, seed: UInt64(name.utf8.count)))
            }
            var stall = TestOrigin.Behavior()
            stall.stallAfterBytes = 1024
            stall.stallTimes = 1
            origin.setBehavior("/first", stall)
            let client = try daemon.client()
            _ = try client.openSession("q")
            func create(_ name: String, _ priority: TaskPriority?) throws -> Int64 {
                try client.createTask(TaskCreateParams(session: "q", url: origin.url("/\(name)"), start: true,
                                                       priority: priority)).id
            }
            let first = try create("first", nil)
            try client.waitFor(task: first, state: .running)
            try await origin.waitUntilBytesServed("/first", atLeast: 1024)
            let low = try create("low", .low)
            let n1 = try create("n1", nil)
            let high = try create("high", .high)
            let n2 = try create("n2", .normal)
            func positions() throws -> [Int64] {
                try client.tasks(state: .queued).sorted { ($0.queuePosition ?? 0) < ($1.queuePosition ?? 0) }.map(\.id)
            }
            #expect(try positions() == [high, n1, n2, low])
            let held = try client.task(n1)
            #expect(held.hold?.reason == "maxConcurrent")
            let show = try ctl(["show", String(n1)], socket: daemon.socketPath)
            #expect(show.stdout.contains("1 of 1 daemon-wide transfer slots in use"), "\(show.stdout)")

            let moved = try ctl(["move", String(n2), "--to-front"], socket: daemon.socketPath)
            #expect(moved.status == 0, "\(moved.stderr)")
            #expect(try positions() == [high, n2, n1, low])
            let raised = try ctl(["--json", "set", String(low), "--priority", "high"], socket: daemon.socketPath)
            #expect(raised.status == 0, "\(raised.stderr)")
            // Raised to high, it keeps its arrival order: it came before `high`.
            #expect(try positions() == [low, high, n2, n1])
            #expect(try client.move(low, to: .back).queuePosition == 2)
            #expect(try positions() == [high, low, n2, n1])
            #expect(rpcCode { _ = try client.move(first, to: .front) } == .illegalStateChange)

            try daemon.terminate()
            try daemon.restart()
            let after = try daemon.client()
            for id in [first, low, n1, high, n2] { try after.waitFor(task: id, state: .completed) }
            // Finished, they are in the journal only: an edit is refused with the state they finished in.
            #expect(rpcCode { _ = try after.move(n1, to: .front) } == .illegalStateChange)
            #expect(rpcCode { _ = try after.update(high, priority: .low) } == .illegalStateChange)
            let edited = try ctl(["set", String(low), "--priority", "low"], socket: daemon.socketPath)
            #expect(edited.status != 0 && edited.stderr.contains("Cannot update task \(low): it is completed"), "\(edited.stderr)")
            #expect(try after.task(high).priority == .high)
            #expect(try after.task(low).priority == .high)
            // One at a time, in queue order: the high ones, then n2 (moved to the front), first, n1.
            let order = origin.requests().filter { $0.status != 0 }.map(\.path)
            let restarted = Array(order.drop { $0 == "/first" })
            #expect(restarted == ["/high", "/low", "/n2", "/first", "/n1"], "\(order)")
        }
    }
}

/// The RPC error code a call threw, if it threw one.
func rpcCode(_ body: () throws -> Void) -> RPCErrorCode? {
    do {
        try body()
        return nil
    } catch HalfTunesClientError.rpc(let error) {
        return error.knownCode
    } catch {
        return nil
    }
}
