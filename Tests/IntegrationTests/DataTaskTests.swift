import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Data tasks through the real daemon")
struct DataTaskTests {
    @Test func aDataTaskReturnsTheBodyInItsCompletionAndTaskInfo() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 300_000, seed: 50)
            origin.put("/api/blob", body)
            let client = try daemon.client()
            let opened = try client.openSession("data")
            let events = try EventRecorder(client: client, session: "data", after: opened.session.lastEventSeq)
            let t = try client.createDataTask(session: "data", url: origin.url("/api/blob"), start: true)
            #expect(t.kind == "data")
            #expect(t.method == "GET")
            let completion = try events.wait(for: "didComplete") { $0.task == t.id && $0.isDidComplete }
            #expect(completion.completionError == .some(nil))
            let response = try #require(completion.completionResponse)
            #expect(response.status == 200)
            #expect(response.bodyBytes == Int64(body.count))
            #expect(response.truncated == false)
            #expect(response.bodyBytesDecoded.map(TestOrigin.sha256Hex) == TestOrigin.sha256Hex(body))
            #expect(response.header("Content-Type") == "application/octet-stream")
            let info = try client.task(t.id)
            #expect(info.state == .completed)
            #expect(info.response?.bodyBytesDecoded.map(TestOrigin.sha256Hex) == TestOrigin.sha256Hex(body))
            // task.list leaves bodies out (they can be megabytes each); the rest of the response is there.
            let listed = try #require(try client.tasks(session: "data").first)
            #expect(listed.response?.status == 200)
            #expect(listed.response?.bodyBytes == Int64(body.count))
            #expect(listed.response?.body == nil)
            // Nothing was written to disk for it.
            #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.downloadsDir).isEmpty)
        }
    }

    @Test func aSixteenMiBBodyGoesThroughEventsAndTaskGet() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 16 * MiB, seed: 51)
            origin.put("/max", body)
            let client = try daemon.client()
            let opened = try client.openSession("big")
            let events = try EventRecorder(client: client, session: "big", after: opened.session.lastEventSeq)
            let t = try client.createDataTask(session: "big", url: origin.url("/max"), start: true)
            let completion = try events.wait(for: "didComplete") { $0.task == t.id && $0.isDidComplete }
            #expect(completion.completionResponse?.bodyBytesDecoded.map(TestOrigin.sha256Hex) == TestOrigin.sha256Hex(body))
            #expect(try client.task(t.id).response?.bodyBytesDecoded?.count == body.count)
            // A late subscriber gets it replayed from the journal.
            let replay = try EventRecorder(client: client, session: "big", after: opened.session.lastEventSeq)
            let replayed = try replay.wait(for: "replayed didComplete") { $0.task == t.id && $0.isDidComplete }
            #expect(replayed.completionResponse?.bodyBytes == Int64(body.count))
        }
    }

    /// A data task's body is journaled for its completion only: it is there (in task.get and for replay,
    /// across a restart) until the client acknowledges the didComplete event; then it is kept nowhere, and
    /// the rest of the response stays.
    @Test func theBodyIsGoneOnceItsCompletionIsAcknowledged() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 200_000, seed: 53)
            origin.put("/ack", body)
            var client = try daemon.client()
            let opened = try client.openSession("acked")
            let events = try EventRecorder(client: client, session: "acked", after: opened.session.lastEventSeq)
            let t = try client.createDataTask(session: "acked", url: origin.url("/ack"), start: true)
            let completion = try events.wait(for: "didComplete") { $0.task == t.id && $0.isDidComplete }
            let seq = try #require(completion.seq)
            // Not yet acknowledged: kept across a crash, for task.get and replay.
            daemon.kill9()
            try daemon.restart()
            client = try daemon.client()
            #expect(try client.task(t.id).response?.bodyBytesDecoded.map(TestOrigin.sha256Hex) == TestOrigin.sha256Hex(body))
            // An event before the completion acknowledged: the body stays.
            _ = try client.ack(session: "acked", through: seq - 1)
            #expect(try client.task(t.id).response?.body != nil)
            _ = try client.ack(session: "acked", through: seq)
            let after = try #require(try client.task(t.id).response)
            #expect(after.body == nil && after.status == 200 && after.bodyBytes == Int64(body.count))
            daemon.kill9()
            try daemon.restart()
            client = try daemon.client()
            let restarted = try #require(try client.task(t.id).response)
            #expect(restarted.body == nil && restarted.bodyBytes == Int64(body.count) && restarted.status == 200)
        }
    }

    @Test func aBodyOverTheCapFailsTheTask() async throws {
        try await withDaemon { daemon, origin in
            origin.put("/long", TestOrigin.randomBytes(count: 5000, seed: 52))
            origin.put("/chunked", TestOrigin.randomBytes(count: 5000, seed: 53))
            var chunked = TestOrigin.Behavior()
            chunked.omitContentLength = true
            origin.setBehavior("/chunked", chunked)
            let client = try daemon.client()
            _ = try client.openSession("cap")
            for path in ["/long", "/chunked"] {
                let t = try client.createDataTask(session: "cap", url: origin.url(path), maxResponseBytes: 1000, start: true)
                let failed = try client.waitFor(task: t.id, state: .failed)
                #expect(failed.error?.code == TaskErrorCode.responseTooLarge, "\(path)")
                #expect(failed.error?.message.contains("1000 bytes") == true, "\(path): \(failed.error?.message ?? "")")
                #expect(failed.response?.status == 200, "\(path)")
                #expect(failed.response?.body == nil, "\(path)")
                #expect(failed.response?.truncated == true, "\(path)")
            }
            // Exactly at the cap is fine.
            let t = try client.createDataTask(session: "cap", url: origin.url("/long"), maxResponseBytes: 5000, start: true)
            #expect(try client.waitFor(task: t.id, state: .completed).response?.bodyBytes == 5000)
        }
    }

    @Test func a404FailsWithTheStatusAndA503IsRetried() async throws {
        try await withDaemon { daemon, origin in
            origin.put("/flaky", Array("hello".utf8))
            var flaky = TestOrigin.Behavior()
            flaky.failStatus = 503
            flaky.failTimes = 1
            flaky.retryAfter = "0"
            origin.setBehavior("/flaky", flaky)
            let client = try daemon.client()
            let opened = try client.openSession("st", configuration: SessionConfiguration(retry: RetryPolicy(initialDelay: 0.2, jitter: 0)))
            let events = try EventRecorder(client: client, session: "st", after: opened.session.lastEventSeq)
            let missing = try client.createDataTask(session: "st", url: origin.url("/nothing"), start: true)
            let failed = try client.waitFor(task: missing.id, state: .failed)
            #expect(failed.error?.code == TaskErrorCode.httpStatus)
            #expect(failed.error?.httpStatus == 404)
            #expect(failed.response?.status == 404)
            let completion = try events.wait(for: "didComplete") { $0.task == missing.id && $0.isDidComplete }
            #expect(completion.completionResponse?.status == 404)
            #expect(completion.completionResponse?.bodyBytesDecoded.map { String(decoding: $0, as: UTF8.self) }?
                .contains("404 Not Found") == true)

            let retried = try client.createDataTask(session: "st", url: origin.url("/flaky"), start: true)
            let done = try client.waitFor(task: retried.id, state: .completed)
            #expect(done.response?.bodyBytesDecoded == Array("hello".utf8))
            #expect(done.attempts == 2)
            #expect(origin.requests("/flaky").map(\.status) == [503, 200])
        }
    }

    @Test func headReturnsTheStatusAndHeadersOnly() async throws {
        try await withDaemon { daemon, origin in
            origin.put("/huge", TestOrigin.randomBytes(count: 20 * MiB, seed: 54))
            let client = try daemon.client()
            _ = try client.openSession("head")
            let t = try client.createDataTask(session: "head", url: origin.url("/huge"), method: "head", start: true)
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(done.method == "HEAD")
            #expect(done.response?.status == 200)
            #expect(done.response?.header("Content-Length") == String(20 * MiB))
            #expect(done.response?.bodyBytes == 0)
            #expect(origin.requests("/huge").map(\.method) == ["HEAD"])
        }
    }

    @Test func badDataTaskParamsAreRefused() async throws {
        try await withDaemon { daemon, origin in
            let client = try daemon.client()
            _ = try client.openSession("bad")
            func message(_ params: TaskCreateParams) -> String? {
                do {
                    _ = try client.createTask(params)
                    return nil
                } catch HalfTunesClientError.rpc(let e) {
                    return e.code == RPCErrorCode.invalidParams.rawValue ? e.message : "code \(e.code)"
                } catch {
                    return "\(error)"
                }
            }
            let url = origin.url("/x")
            #expect(message(TaskCreateParams(session: "bad", url: url, kind: .data, method: "POST"))?
                .contains("use GET or HEAD") == true)
            #expect(message(TaskCreateParams(session: "bad", url: url, kind: .data, maxResponseBytes: 0))?
                .contains("maxResponseBytes") == true)
            #expect(message(TaskCreateParams(session: "bad", url: url, kind: .data, maxResponseBytes: 16 * 1024 * 1024 + 1))?
                .contains("maxResponseBytes") == true)
            #expect(message(TaskCreateParams(session: "bad", url: url, kind: .data, file: "/etc/hostname"))?
                .contains("uploads only") == true)
            #expect(message(TaskCreateParams(session: "bad", url: url, method: "GET"))?
                .contains("upload and data tasks only") == true)
            #expect(message(TaskCreateParams(session: "bad", url: url, kind: .data, checksum: "sha256:" + String(repeating: "0", count: 64)))
                != nil)
            #expect(try client.tasks(session: "bad").isEmpty)
        }
    }

    @Test func cliFetchWritesTheBodyAndFailsOnErrors() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 2 * MiB + 7, seed: 55)
            origin.put("/file.bin", body)
            origin.put("/hello.txt", Array("hello, world\n".utf8))
            let out = daemon.dir.path + "/fetched.bin"
            let r = try ctl(["fetch", origin.url("/file.bin"), "--output", out, "--session", "cli"], socket: daemon.socketPath)
            #expect(r.status == 0, "stdout: \(r.stdout) stderr: \(r.stderr)")
            #expect(try sha256(ofFile: out) == TestOrigin.sha256Hex(body))
            let text = try ctl(["fetch", origin.url("/hello.txt")], socket: daemon.socketPath)
            #expect(text.status == 0, "\(text.stderr)")
            #expect(text.stdout == "hello, world\n")
            let missing = try ctl(["fetch", origin.url("/absent")], socket: daemon.socketPath)
            #expect(missing.status == 1)
            #expect(missing.stdout.isEmpty)
            #expect(missing.stderr.contains("HTTP 404"), "\(missing.stderr)")
            let capped = try ctl(["fetch", origin.url("/file.bin"), "--max-bytes", "1k"], socket: daemon.socketPath)
            #expect(capped.status == 1)
            #expect(capped.stderr.contains("responseTooLarge"), "\(capped.stderr)")
            let usage = try ctl(["fetch", origin.url("/file.bin"), "--method", "POST"], socket: daemon.socketPath)
            #expect(usage.status == 2)
        }
    }
}
