import Testing
@testable import HalfTunesKit

/// Records every delegate call as a line of text.
final class RecordingDelegate: BackgroundSessionDelegate, @unchecked Sendable {
    let calls = Recorder<String>()
    func session(_ s: BackgroundSession, task: Int64, didWriteData bytesWritten: Int64, totalBytesWritten: Int64,
                 totalBytesExpectedToWrite: Int64) {
        calls.append("write \(task) \(bytesWritten) \(totalBytesWritten) \(totalBytesExpectedToWrite)")
    }
    func session(_ s: BackgroundSession, task: Int64, didResumeAtOffset offset: Int64, expectedTotalBytes: Int64) {
        calls.append("resume \(task) \(offset) \(expectedTotalBytes)")
    }
    func session(_ s: BackgroundSession, task: Int64, didFinishDownloadingTo location: String) {
        calls.append("finish \(task) \(location)")
    }
    func session(_ s: BackgroundSession, task: Int64, didCompleteWithError error: TaskError?) {
        calls.append("complete \(task) \(error?.code ?? "ok")")
    }
    func session(_ s: BackgroundSession, task: Int64, didChangeState state: TaskState) {
        calls.append("state \(task) \(state.rawValue)")
    }
    func didFinishEvents(forBackgroundSession s: BackgroundSession) { calls.append("didFinishEvents \(s.identifier)") }
    func session(_ s: BackgroundSession, didDisconnectWithError error: HalfTunesClientError?) {
        calls.append("disconnect")
    }
}

@Suite(.timeLimit(.minutes(1)))
struct BackgroundSessionTests {
    static let sessionJSON = #"{"session":{"identifier":"s","configuration":{"requestTimeout":60},"state":"active","#
        + #""createdAt":"2026-01-01T00:00:00.000Z","taskCounts":{},"lastEventSeq":3,"ackedThrough":1},"reattached":true}"#

    /// A fake daemon for a session: answers session.open, task.create (suspended), task.resume,
    /// task.cancel (with resume data), events.ack, and events.subscribe with a short script.
    static func daemon(requests: Recorder<JSONValue>) throws -> FakeDaemon {
        try FakeDaemon { peer in
            while let request = try peer.readRequest() {
                requests.append(request)
                guard case .string(let method)? = request["method"] else { return }
                switch method {
                case "session.open":
                    peer.respond(to: request, result: Self.sessionJSON)
                case "task.create":
                    peer.respond(to: request, result: try jsonText(sampleTask(id: 11)))
                case "task.resume":
                    peer.respond(to: request, result: try jsonText(sampleTask(id: 11, state: .queued)))
                case "task.list":
                    peer.respond(to: request, result: try jsonText(TaskListResult(tasks: [sampleTask(id: 12)])))
                case "task.cancel":
                    let result = TaskCancelResult(task: sampleTask(id: 11, state: .canceled), resumeData: "RD-11")
                    peer.respond(to: request, result: try jsonText(result))
                case "events.ack":
                    peer.respond(to: request, result: #"{"ackedThrough":0,"pruned":0}"#)
                case "events.subscribe":
                    peer.respond(to: request, result: #"{"session":"s","after":3,"prunedThrough":1}"#)
                    try peer.send(event: sampleEvent(seq: 4, task: 11, .stateChanged(state: .running, previous: .queued, reason: nil)))
                    try peer.send(event: sampleEvent(seq: 5, task: 11, .didResumeAtOffset(offset: 10, expectedTotalBytes: nil,
                                                                                          discardedBytes: nil, reason: nil)))
                    try peer.send(event: sampleEvent(seq: nil, task: nil, .didFinishEvents(through: 5)))
                    try peer.send(event: sampleEvent(seq: nil, task: 11, .didWriteData(bytesWritten: 90, totalBytesWritten: 100,
                                                                                       totalBytesExpectedToWrite: nil)))
                    try peer.send(event: sampleEvent(seq: 6, task: 11, .didFinishDownloading(location: "/tmp/file-11")))
                    try peer.send(event: sampleEvent(seq: 7, task: 11, .didComplete(error: nil)))
                    return // closes the event connection
                default:
                    try peer.respond(to: request, error: .methodNotFound(method))
                }
            }
        }
    }

    @Test func tasksAreCreatedSuspendedAndControlledLikeURLSession() throws {
        let requests = Recorder<JSONValue>()
        let daemon = try Self.daemon(requests: requests)
        defer { daemon.stop() }
        let session = try BackgroundSession.open(identifier: "s", socketPath: daemon.socketPath)
        #expect(session.identifier == "s")
        #expect(session.reattached)
        #expect(session.info.lastEventSeq == 3)

        let task = try session.downloadTask(with: "http://127.0.0.1:1/file-11", destination: "/tmp/file-11",
                                            headers: ["X-A": "1"], description: "eleven")
        #expect(task.taskIdentifier == 11)
        #expect(task.state == .suspended)
        try task.resume()
        #expect(task.state == .queued)
        #expect(try task.cancel(byProducingResumeData: true) == "RD-11")
        #expect(task.state == .canceled)
        let other = try #require(try session.allTasks().first)
        #expect(other.taskIdentifier == 12)
        try other.cancel()
        #expect(other.state == .canceled)

        let create = try #require(requests.all.first { $0["method"] == .string("task.create") })
        #expect(create["params"] == .object([
            "session": .string("s"), "url": .string("http://127.0.0.1:1/file-11"), "destination": .string("/tmp/file-11"),
            "headers": .object(["X-A": .string("1")]), "description": .string("eleven"), "start": .bool(false),
        ]))
        let cancels = requests.all.filter { $0["method"] == .string("task.cancel") }.map { $0["params"] }
        #expect(cancels == [.object(["id": .int(11), "produceResumeData": .bool(true)]),
                            .object(["id": .int(12), "produceResumeData": .bool(false)])])
        let list = try #require(requests.all.first { $0["method"] == .string("task.list") })
        #expect(list["params"] == .object(["session": .string("s")]))
    }

    @Test func anAttachedDelegateGetsReplayedAndLiveEventsInOrderAndAcknowledgesThem() throws {
        let requests = Recorder<JSONValue>()
        let daemon = try Self.daemon(requests: requests)
        defer { daemon.stop() }
        let session = try BackgroundSession.open(identifier: "s", socketPath: daemon.socketPath)
        let delegate = RecordingDelegate()
        try session.attach(delegate: delegate, after: 3)
        #expect(waitUntil { delegate.calls.all.last == "disconnect" })
        #expect(delegate.calls.all == [
            "state 11 running", "resume 11 10 -1", "didFinishEvents s", "write 11 90 100 -1",
            "finish 11 /tmp/file-11", "complete 11 ok", "disconnect",
        ])
        #expect(session.lastDeliveredSeq == 7)
        // The replay is acknowledged once when it is done, live journaled events one by one.
        let acks = requests.all.filter { $0["method"] == .string("events.ack") }.map { $0["params"]?["through"] }
        #expect(acks == [.int(5), .int(6), .int(7)])
        let subscribe = try #require(requests.all.first { $0["method"] == .string("events.subscribe") })
        #expect(subscribe["params"] == .object(["session": .string("s"), "after": .int(3)]))
        session.detach()
    }

    /// `handleEvents` (what an app started for its session's events runs): the replay after 0 is delivered on
    /// the calling thread up to `didFinishEvents`, acknowledged through its last event, and the call returns
    /// without waiting for live events.
    @Test func handleEventsDeliversTheReplayAcknowledgesAndReturns() throws {
        let requests = Recorder<JSONValue>()
        let daemon = try Self.daemon(requests: requests)
        defer { daemon.stop() }
        let delegate = RecordingDelegate()
        let n = try BackgroundSession.handleEvents(forSession: "s", delegate: delegate, socketPath: daemon.socketPath)
        #expect(n == 2)
        #expect(delegate.calls.all == ["state 11 running", "resume 11 10 -1", "didFinishEvents s"])
        let acks = requests.all.filter { $0["method"] == .string("events.ack") }.map { $0["params"] }
        #expect(acks == [.object(["session": .string("s"), "through": .int(5)])])
        let subscribe = try #require(requests.all.first { $0["method"] == .string("events.subscribe") })
        #expect(subscribe["params"] == .object(["session": .string("s"), "after": .int(0)]))
    }

    /// `data(from:)` subscribes after the session's last event, creates and resumes a data task, skips other
    /// tasks' events, reads the body from the finished task, then acknowledges its completion; an HTTP error
    /// status is a response, a transfer failure is thrown. `task(withIdentifier:)` refuses another session's task.
    @Test func dataFromRunsADataTaskToItsEnd() throws {
        let requests = Recorder<JSONValue>()
        let failing = Recorder<Bool>()
        let daemon = try FakeDaemon { peer in
            while let request = try peer.readRequest() {
                requests.append(request)
                guard case .string(let method)? = request["method"] else { return }
                var task = sampleTask(id: 21)
                switch method {
                case "session.open":
                    peer.respond(to: request, result: Self.sessionJSON)
                case "task.create", "task.resume":
                    peer.respond(to: request, result: try jsonText(task))
                case "task.get":
                    if case .int(let id)? = request["params"]?["id"], id == 99 {
                        peer.respond(to: request, result: try jsonText(sampleTask(id: 99, session: "other")))
                        continue
                    }
                    task.state = failing.all.isEmpty ? .completed : .failed
                    task.response = TaskResponse(status: 200, body: "aGVsbG8=", bodyBytes: 5, truncated: false)
                    peer.respond(to: request, result: try jsonText(task))
                case "events.ack":
                    peer.respond(to: request, result: #"{"ackedThrough":5,"pruned":2}"#)
                case "events.subscribe":
                    peer.respond(to: request, result: #"{"session":"s","after":3,"prunedThrough":1}"#)
                    try peer.send(event: sampleEvent(seq: nil, task: nil, .didFinishEvents(through: 3)))
                    try peer.send(event: sampleEvent(seq: 4, task: 20, .didComplete(error: nil)))
                    let error = failing.all.isEmpty ? nil : TaskError(code: TaskErrorCode.connectionRefused, message: "refused")
                    try peer.send(event: sampleEvent(seq: 5, task: 21, .didComplete(error: error)))
                default:
                    try peer.respond(to: request, error: .methodNotFound(method))
                }
            }
        }
        defer { daemon.stop() }
        let session = try BackgroundSession.open(identifier: "s", socketPath: daemon.socketPath)
        let (body, response) = try session.data(from: "http://127.0.0.1:1/api", description: "api")
        #expect(body == Array("hello".utf8) && response.status == 200)
        let subscribe = try #require(requests.all.first { $0["method"] == .string("events.subscribe") })
        #expect(subscribe["params"]?["after"] == .int(3))
        let create = try #require(requests.all.first { $0["method"] == .string("task.create") })
        #expect(create["params"]?["kind"] == .string("data") && create["params"]?["start"] == .bool(false))
        #expect(requests.all.contains { $0["method"] == .string("task.resume") })
        let acks = requests.all.filter { $0["method"] == .string("events.ack") }.map { $0["params"]?["through"] }
        #expect(acks == [.int(5)], "only its own completion, after the body was read")
        let order = requests.all.compactMap { r -> String? in
            guard case .string(let m)? = r["method"], m == "task.get" || m == "events.ack" else { return nil }
            return m
        }
        #expect(order == ["task.get", "events.ack"])

        failing.append(true)
        #expect(throws: TaskError.self) { _ = try session.data(from: "http://127.0.0.1:1/api") }
        #expect(throws: HalfTunesClientError.self) { _ = try session.task(withIdentifier: 99) }
        #expect(try session.task(withIdentifier: 21).taskIdentifier == 21)
    }

    @Test func afterDetachTheDelegateHearsNothingMore() throws {
        let release = Recorder<Bool>()
        let daemon = try FakeDaemon { peer in
            while let request = try peer.readRequest() {
                if request["method"] == .string("session.open") { peer.respond(to: request, result: Self.sessionJSON) }
                if request["method"] == .string("events.subscribe") {
                    peer.respond(to: request, result: #"{"session":"s","after":0,"prunedThrough":0}"#)
                    try peer.send(event: sampleEvent(seq: nil, task: nil, .didFinishEvents(through: 0)))
                    _ = waitUntil { !release.all.isEmpty }
                    try peer.send(event: sampleEvent(seq: 9, task: 1, .didComplete(error: nil)))
                }
            }
        }
        defer { daemon.stop() }
        let session = try BackgroundSession.open(identifier: "s", socketPath: daemon.socketPath)
        let delegate = RecordingDelegate()
        try session.attach(delegate: delegate, autoAcknowledge: false)
        #expect(waitUntil { delegate.calls.all == ["didFinishEvents s"] })
        session.detach()
        release.append(true)
        #expect(delegate.calls.all == ["didFinishEvents s"])
    }
}
