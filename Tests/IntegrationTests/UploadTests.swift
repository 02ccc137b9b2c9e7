import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Writes `bytes` to a new file in `dir`; returns its path.
func writeFile(_ bytes: [UInt8], named name: String, in dir: String) throws -> String {
    let path = dir + "/" + name
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    return path
}

extension Event {
    var completionResponse: TaskResponse? { if case .didComplete(_, let r) = payload { return r } else { return nil } }
    var sentTotals: (total: Int64, expected: Int64?)? {
        if case let .didSendBodyData(_, total, expected) = payload { return (total, expected) } else { return nil }
    }
}

@Suite("Uploads through the real daemon")
struct UploadTests {
    @Test func uploadArrivesWholeWithProgressAndTheResponse() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 6 * MiB + 321, seed: 40)
            let file = try writeFile(body, named: "photo.raw", in: daemon.dir.path)
            origin.acceptUploads("/up/photo.raw")
            let client = try daemon.client()
            let opened = try client.openSession("up")
            let events = try EventRecorder(client: client, session: "up", after: opened.session.lastEventSeq)
            let t = try client.createUpload(session: "up", url: origin.url("/up/photo.raw"), file: file,
                                            headers: ["Content-Type": "image/x-raw"], start: true)
            #expect(t.kind == "upload")
            #expect(t.method == "PUT")
            #expect(t.file == file)
            #expect(t.bytesExpectedToSend == Int64(body.count))
            let done = try client.waitFor(task: t.id, state: .completed)
            let received = try #require(origin.uploads("/up/photo.raw").last)
            #expect(received.complete)
            #expect(received.method == "PUT")
            #expect(received.bytes == Int64(body.count))
            #expect(received.contentLength == Int64(body.count))
            #expect(received.sha256 == TestOrigin.sha256Hex(body))
            let request = try #require(origin.requests("/up/photo.raw").last)
            #expect(request.header("Content-Type") == "image/x-raw")
            // The response ends the task: in TaskInfo and in didComplete.
            let expectedText = "received \(body.count) bytes sha256 \(TestOrigin.sha256Hex(body))\n"
            #expect(done.response?.status == 201)
            #expect(done.response?.bodyBytesDecoded == Array(expectedText.utf8))
            #expect(done.bytesSent == Int64(body.count))
            let completion = try events.wait(for: "didComplete") { $0.task == t.id && $0.isDidComplete }
            #expect(completion.completionError == .some(nil))
            #expect(completion.completionResponse?.status == 201)
            #expect(completion.completionResponse?.bodyBytesDecoded == Array(expectedText.utf8))
            let progress = events.all.filter { $0.task == t.id }.compactMap(\.sentTotals)
            #expect(!progress.isEmpty)
            #expect(progress.last?.total == Int64(body.count))
            #expect(progress.allSatisfy { $0.expected == Int64(body.count) })
            #expect(progress.map(\.total) == progress.map(\.total).sorted())
        }
    }

    @Test func postIsSentWithPostAndADefaultContentType() async throws {
        try await withDaemon { daemon, origin in
            let body = Array("name=value".utf8)
            let file = try writeFile(body, named: "form.txt", in: daemon.dir.path)
            var endpoint = TestOrigin.UploadEndpoint()
            endpoint.status = 200
            endpoint.responseBody = Array("{\"ok\":true}".utf8)
            origin.acceptUploads("/api/form", endpoint)
            let client = try daemon.client()
            _ = try client.openSession("post")
            let t = try client.createUpload(session: "post", url: origin.url("/api/form"), file: file, method: "post",
                                            start: true)
            #expect(t.method == "POST")
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(done.response?.status == 200)
            #expect(done.response?.bodyBytesDecoded == Array("{\"ok\":true}".utf8))
            let request = try #require(origin.requests("/api/form").last)
            #expect(request.method == "POST")
            #expect(request.header("Content-Type") == "application/octet-stream")
            #expect(origin.uploads("/api/form").last?.sha256 == TestOrigin.sha256Hex(body))
        }
    }

    @Test func aDroppedUploadIsRetriedFromItsFirstByte() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 3 * MiB, seed: 41)
            let file = try writeFile(body, named: "drop.bin", in: daemon.dir.path)
            var endpoint = TestOrigin.UploadEndpoint()
            endpoint.dropAfterBytes = Int64(MiB)
            endpoint.dropTimes = 1
            origin.acceptUploads("/up/drop.bin", endpoint)
            let client = try daemon.client()
            let opened = try client.openSession("drop", configuration: SessionConfiguration(retry: RetryPolicy(initialDelay: 0.2, jitter: 0)))
            let events = try EventRecorder(client: client, session: "drop", after: opened.session.lastEventSeq)
            let t = try client.createUpload(session: "drop", url: origin.url("/up/drop.bin"), file: file, start: true)
            let done = try client.waitFor(task: t.id, state: .completed)
            let uploads = origin.uploads("/up/drop.bin")
            #expect(uploads.count == 2)
            #expect(uploads.first?.complete == false)
            #expect(uploads.first?.bytes == Int64(MiB))
            #expect(uploads.last?.complete == true)
            #expect(uploads.last?.bytes == Int64(body.count))
            #expect(uploads.last?.sha256 == TestOrigin.sha256Hex(body))
            #expect(done.attempts == 2)
            let waiting = try events.wait(for: "waiting") {
                if case .stateChanged(.waiting, _, let reason) = $0.payload { return reason?.code == TaskErrorCode.connectionLost }
                return false
            }
            #expect(waiting.task == t.id)
        }
    }

    @Test func a503IsRetriedAndA403FailsWithTheResponse() async throws {
        try await withDaemon { daemon, origin in
            let file = try writeFile(TestOrigin.randomBytes(count: 200_000, seed: 42), named: "a.bin", in: daemon.dir.path)
            origin.acceptUploads("/busy")
            var busy = TestOrigin.Behavior()
            busy.failStatus = 503
            busy.failTimes = 1
            busy.retryAfter = "0"
            origin.setBehavior("/busy", busy)
            var forbidden = TestOrigin.UploadEndpoint()
            forbidden.status = 403
            forbidden.responseBody = Array("no uploads here".utf8)
            origin.acceptUploads("/forbidden", forbidden)
            let client = try daemon.client()
            let opened = try client.openSession("st", configuration: SessionConfiguration(retry: RetryPolicy(initialDelay: 0.2, jitter: 0)))
            let events = try EventRecorder(client: client, session: "st", after: opened.session.lastEventSeq)
            let retried = try client.createUpload(session: "st", url: origin.url("/busy"), file: file, start: true)
            let ok = try client.waitFor(task: retried.id, state: .completed)
            #expect(ok.response?.status == 201)
            #expect(origin.uploads("/busy").count == 2)
            #expect(origin.uploads("/busy").allSatisfy { $0.complete && $0.bytes == 200_000 })

            let refused = try client.createUpload(session: "st", url: origin.url("/forbidden"), file: file, start: true)
            let failed = try client.waitFor(task: refused.id, state: .failed)
            #expect(failed.error?.code == TaskErrorCode.httpStatus)
            #expect(failed.error?.httpStatus == 403)
            #expect(failed.response?.status == 403)
            #expect(failed.response?.bodyBytesDecoded == Array("no uploads here".utf8))
            #expect(origin.uploads("/forbidden").count == 1)
            let completion = try events.wait(for: "didComplete of the refused upload") { $0.task == refused.id && $0.isDidComplete }
            #expect(completion.completionError??.httpStatus == 403)
            #expect(completion.completionResponse?.status == 403)
            #expect(completion.completionResponse?.bodyBytesDecoded == Array("no uploads here".utf8))
        }
    }

    @Test func unusableFilesAndMethodsAreRefusedAtCreate() async throws {
        try await withDaemon { daemon, origin in
            let client = try daemon.client()
            _ = try client.openSession("bad")
            func refusal(_ file: String, method: String? = nil) -> String? {
                do {
                    _ = try client.createUpload(session: "bad", url: origin.url("/x"), file: file, method: method)
                    return nil
                } catch HalfTunesClientError.rpc(let e) {
                    return e.code == RPCErrorCode.invalidParams.rawValue ? e.message : "code \(e.code)"
                } catch {
                    return "\(error)"
                }
            }
            #expect(refusal(daemon.dir.path + "/missing.bin")?.contains("does not exist") == true)
            #expect(refusal(daemon.dir.path)?.contains("is a directory") == true)
            #expect(refusal("relative/file.bin")?.contains("absolute path") == true)
            let file = try writeFile([1, 2, 3], named: "ok.bin", in: daemon.dir.path)
            #expect(refusal(file, method: "GET")?.contains("use PUT or POST") == true)
            #expect(throws: HalfTunesClientError.self) {
                try client.createTask(TaskCreateParams(session: "bad", url: origin.url("/x"), kind: .upload))
            }
            #expect(throws: HalfTunesClientError.self) {
                try client.createTask(TaskCreateParams(session: "bad", url: "ftp://example.com/x", kind: .upload, file: file))
            }
            #expect(throws: HalfTunesClientError.self) {
                try client.createTask(TaskCreateParams(session: "bad", url: origin.url("/x"), destination: "/tmp/y",
                                                       kind: .upload, file: file))
            }
            #expect(try client.tasks(session: "bad").isEmpty)
        }
    }

    @Test(.enabled(if: getuid() != 0, "root reads every file")) func anUnreadableFileIsRefusedAtCreate() async throws {
        try await withDaemon { daemon, origin in
            let file = try writeFile([1, 2, 3], named: "secret.bin", in: daemon.dir.path)
            chmod(file, 0)
            let client = try daemon.client()
            _ = try client.openSession("bad")
            #expect {
                try client.createUpload(session: "bad", url: origin.url("/x"), file: file)
            } throws: { error in
                guard case HalfTunesClientError.rpc(let e) = error else { return false }
                return e.code == RPCErrorCode.invalidParams.rawValue && e.message.contains("may not read")
            }
        }
    }

    @Test func aFileThatChangesWhileSentFailsTheUpload() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 4 * MiB, seed: 43)
            let file = try writeFile(body, named: "growing.log", in: daemon.dir.path)
            origin.acceptUploads("/logs")
            let client = try daemon.client()
            _ = try client.openSession("chg")
            let t = try client.createTask(TaskCreateParams(session: "chg", url: origin.url("/logs"), start: true,
                                                           kind: .upload, bandwidthLimit: Int64(MiB), file: file))
            try eventually("512 KiB received by the origin") { origin.uploadBytesReceived("/logs") >= 512 * 1024 ? true : nil }
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
            handle.seekToEndOfFile()
            handle.write(Data("one more line\n".utf8))
            try handle.close()
            let failed = try client.waitFor(task: t.id, state: .failed)
            #expect(failed.error?.code == TaskErrorCode.sourceUnreadable)
            #expect(failed.error?.message.contains("changed while it was being sent") == true)
            #expect(origin.uploads("/logs").allSatisfy { !$0.complete })
        }
    }

    @Test func bandwidthLimitHoldsAnUploadBack() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 2 * MiB, seed: 44)
            let file = try writeFile(body, named: "slow.bin", in: daemon.dir.path)
            origin.acceptUploads("/slow")
            let client = try daemon.client()
            _ = try client.openSession("bw")
            let rate = Int64(MiB)
            let start = Date()
            let t = try client.createTask(TaskCreateParams(session: "bw", url: origin.url("/slow"), start: true,
                                                           kind: .upload, bandwidthLimit: rate, file: file))
            let done = try client.waitFor(task: t.id, state: .completed)
            let seconds = Date().timeIntervalSince(start)
            #expect(done.bandwidthLimit == rate)
            #expect(origin.uploads("/slow").last?.sha256 == TestOrigin.sha256Hex(body))
            // The token bucket lets at most its small capacity (≤ 1/8 s of the rate) through ahead of the rate.
            #expect(seconds >= 1.7, "2 MiB at 1 MiB/s took only \(seconds) s")
        }
    }

    @Test func cliUploadWaitsAndPrintsTheResponse() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 3 * MiB + 5, seed: 45)
            _ = try writeFile(body, named: "cli.bin", in: daemon.dir.path)
            origin.acceptUploads("/cli.bin")
            let r = try ctl(["upload", "cli.bin", origin.url("/cli.bin"), "--session", "cli", "--wait"],
                            socket: daemon.socketPath, cwd: daemon.dir.path)
            #expect(r.status == 0, "stdout: \(r.stdout) stderr: \(r.stderr)")
            #expect(r.stdout.contains("PUT \(daemon.dir.path)/cli.bin → \(origin.url("/cli.bin"))"), "\(r.stdout)")
            #expect(r.stdout.contains("completed: HTTP 201 Created"), "\(r.stdout)")
            #expect(r.stdout.contains("Body: received \(body.count) bytes sha256 \(TestOrigin.sha256Hex(body))"), "\(r.stdout)")
            #expect(origin.uploads("/cli.bin").last?.sha256 == TestOrigin.sha256Hex(body))

            var refusing = TestOrigin.UploadEndpoint()
            refusing.status = 413
            origin.acceptUploads("/small-only", refusing)
            let failed = try ctl(["upload", daemon.dir.path + "/cli.bin", origin.url("/small-only"), "--method", "POST",
                                  "--session", "cli", "--wait"], socket: daemon.socketPath)
            #expect(failed.status == 1, "stdout: \(failed.stdout) stderr: \(failed.stderr)")
            #expect(failed.stderr.contains("HTTP 413"), "\(failed.stderr)")
            let list = try ctl(["list", "--session", "cli"], socket: daemon.socketPath)
            #expect(list.stdout.contains("POST → \(origin.url("/small-only"))"), "\(list.stdout)")
            let missing = try ctl(["upload", "nope.bin", origin.url("/cli.bin")], socket: daemon.socketPath,
                                  cwd: daemon.dir.path)
            #expect(missing.status == 2, "\(missing.stderr)")
            #expect(missing.stderr.contains("does not exist"), "\(missing.stderr)")
        }
    }

    @Test func killNineMidUploadRestartsItFromZero() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 3 * MiB, seed: 46)
            let file = try writeFile(body, named: "crash.bin", in: daemon.dir.path)
            origin.acceptUploads("/crash.bin")
            var client = try daemon.client()
            _ = try client.openSession("crash")
            let t = try client.createTask(TaskCreateParams(session: "crash", url: origin.url("/crash.bin"), start: true,
                                                           kind: .upload, bandwidthLimit: Int64(MiB), file: file))
            try eventually("1 MiB received by the origin") { origin.uploadBytesReceived("/crash.bin") >= Int64(MiB) ? true : nil }
            daemon.kill9()
            try daemon.restart()
            client = try daemon.client()
            _ = try client.update(t.id, bandwidthLimit: 0)
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(done.response?.status == 201)
            let uploads = origin.uploads("/crash.bin")
            #expect(uploads.count == 2)
            #expect(uploads.first?.complete == false)
            #expect((uploads.first?.bytes ?? 0) >= Int64(MiB))
            #expect(uploads.last?.complete == true)
            #expect(uploads.last?.bytes == Int64(body.count))
            #expect(uploads.last?.sha256 == TestOrigin.sha256Hex(body))
        }
    }
}

/// Collects what a BackgroundSessionDelegate is told about uploads and data tasks.
final class ExchangeDelegateRecorder: BackgroundSessionDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var sent: [Int64: Int64] = [:]
    private var completions: [Int64: (TaskError?, TaskResponse?)] = [:]

    func session(_ s: BackgroundSession, task: Int64, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
                 totalBytesExpectedToSend: Int64) {
        lock.withLock { sent[task] = totalBytesSent }
    }

    func session(_ s: BackgroundSession, task: Int64, didCompleteWithError error: TaskError?, response: TaskResponse?) {
        lock.withLock { completions[task] = (error, response) }
    }

    func totalSent(_ task: Int64) -> Int64? { lock.withLock { sent[task] } }
    func completion(_ task: Int64) -> (TaskError?, TaskResponse?)? { lock.withLock { completions[task] } }
}

@Suite("Uploads and data tasks through HalfTunesKit's BackgroundSession")
struct BackgroundSessionExchangeTests {
    @Test func uploadAndDataTasksReportToTheDelegate() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: MiB, seed: 47)
            let file = try writeFile(body, named: "kit.bin", in: daemon.dir.path)
            origin.acceptUploads("/kit.bin")
            origin.put("/kit.json", Array("{\"a\":1}".utf8))
            let session = try BackgroundSession.open(identifier: "kit", socketPath: daemon.socketPath)
            let delegate = ExchangeDelegateRecorder()
            try session.attach(delegate: delegate)
            defer { session.detach() }
            let upload = try session.uploadTask(with: origin.url("/kit.bin"), fromFile: file, method: "POST")
            let data = try session.dataTask(with: origin.url("/kit.json"))
            #expect(upload.kind == .upload)
            #expect(upload.countOfBytesExpectedToSend == Int64(body.count))
            #expect(data.kind == .data)
            #expect(upload.state == .suspended)
            try upload.resume()
            try data.resume()
            let (uploadError, uploadResponse) = try eventually("the upload's completion") { delegate.completion(upload.taskIdentifier) }
            #expect(uploadError == nil)
            #expect(uploadResponse?.status == 201)
            #expect(delegate.totalSent(upload.taskIdentifier) == Int64(body.count))
            let (dataError, dataResponse) = try eventually("the data task's completion") { delegate.completion(data.taskIdentifier) }
            #expect(dataError == nil)
            #expect(dataResponse?.bodyBytesDecoded == Array("{\"a\":1}".utf8))
            try upload.refresh()
            #expect(upload.response?.status == 201)
            #expect(upload.countOfBytesSent == Int64(body.count))
            #expect(origin.uploads("/kit.bin").last?.sha256 == TestOrigin.sha256Hex(body))
        }
    }
}
