#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import HalfTunesKit

@Suite(.timeLimit(.minutes(1)))
struct ConnectionTests {
    @Test func responsesAreMatchedByIdAndNotificationsInBetweenAreQueued() throws {
        let requests = Recorder<JSONValue>()
        let daemon = try FakeDaemon { peer in
            guard let first = try peer.readRequest() else { return }
            requests.append(first)
            try peer.send(event: sampleEvent(seq: 1, task: 7, .stateChanged(state: .queued, previous: .suspended, reason: nil)))
            try peer.send(event: sampleEvent(seq: nil, task: 7, .didWriteData(bytesWritten: 10, totalBytesWritten: 10,
                                                                             totalBytesExpectedToWrite: 100)))
            peer.send(#"{"jsonrpc":"2.0","id":0,"result":{"stale":true}}"#) // an older call's late answer
            peer.respond(to: first, result: try jsonText(sampleTask(id: 7, state: .running)))
            guard let second = try peer.readRequest() else { return }
            requests.append(second)
            peer.respond(to: second, result: #"{"answer":42}"#)
            _ = try peer.readRequest()
        }
        defer { daemon.stop() }

        let connection = try HalfTunesConnection(socketPath: daemon.socketPath)
        let task = try connection.call(.taskGet, TaskIDParams(id: 7), as: TaskInfo.self)
        #expect(task.id == 7)
        #expect(task.state == .running)
        let raw = try connection.callRaw("daemon.status", params: nil)
        #expect(raw == .object(["answer": .int(42)]))

        let first = try #require(try connection.nextNotification())
        #expect(first.method == "event")
        #expect(first.params["type"] == .string("stateChanged"))
        let second = try #require(try connection.nextNotification())
        #expect(second.params["type"] == .string("didWriteData"))

        let sent = requests.all
        #expect(sent.count == 2)
        #expect(sent[0]["id"] == .int(1))
        #expect(sent[0]["jsonrpc"] == .string("2.0"))
        #expect(sent[0]["method"] == .string("task.get"))
        #expect(sent[0]["params"] == .object(["id": .int(7)]))
        #expect(sent[1]["id"] == .int(2))
        #expect(sent[1]["method"] == .string("daemon.status"))
        #expect(sent[1]["params"] == nil)
        connection.close()
    }

    @Test func rpcErrorsSurfaceWithTheirCode() throws {
        let daemon = try FakeDaemon { peer in
            while let request = try peer.readRequest() {
                try peer.respond(to: request, error: .unknownTask(9))
            }
        }
        defer { daemon.stop() }

        let client = try HalfTunesClient(socketPath: daemon.socketPath)
        do {
            _ = try client.task(9)
            Issue.record("task.get should have failed")
        } catch let error as HalfTunesClientError {
            guard case .rpc(let rpc) = error else { Issue.record("expected .rpc, got \(error)"); return }
            #expect(rpc.code == RPCErrorCode.unknownTask.rawValue)
            #expect(rpc.knownCode == .unknownTask)
            #expect(error.rpcCode == .unknownTask)
            #expect(error.description == RPCError.unknownTask(9).message)
        }
        // The connection stays usable after an error response.
        #expect(throws: HalfTunesClientError.rpc(.unknownTask(9))) { try client.resume(9) }
    }

    @Test func aMissingSocketMeansTheDaemonIsNotRunning() throws {
        let directory = try makeTemporaryDirectory()
        defer { rmdir(directory) }
        let path = directory + "/control.sock"
        #expect(throws: HalfTunesClientError.daemonNotRunning(socketPath: path)) {
            try HalfTunesConnection(socketPath: path)
        }
        let message = HalfTunesClientError.daemonNotRunning(socketPath: path).description
        #expect(message.contains(path))
        #expect(message.contains("make run"))
        #expect(message.contains("systemctl start halftunesd"))
    }

    @Test func aStaleSocketFileMeansTheDaemonIsNotRunning() throws {
        let directory = try makeTemporaryDirectory()
        let path = directory + "/control.sock"
        defer { unlink(path); rmdir(directory) }
        // A socket file nobody listens on any more (ECONNREFUSED), as left by a killed daemon.
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = unixAddress(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0)
        close(fd)
        #expect(throws: HalfTunesClientError.daemonNotRunning(socketPath: path)) {
            try HalfTunesClient(socketPath: path)
        }
    }

    @Test func theDaemonClosingDuringACallIsReported() throws {
        let daemon = try FakeDaemon { peer in _ = try peer.readRequest() }
        defer { daemon.stop() }
        let connection = try HalfTunesConnection(socketPath: daemon.socketPath)
        #expect(throws: HalfTunesClientError.connectionClosed) {
            try connection.call(.daemonStatus, as: DaemonStatus.self)
        }
    }

    @Test func aCallWithoutAnswerTimesOut() throws {
        let daemon = try FakeDaemon { peer in
            while try peer.readRequest() != nil {}
        }
        defer { daemon.stop() }
        let connection = try HalfTunesConnection(socketPath: daemon.socketPath, callTimeout: 0.2)
        #expect(throws: HalfTunesClientError.timedOut(method: "session.list", seconds: 0.2)) {
            try connection.call(.sessionList, as: SessionListResult.self)
        }
        connection.close()
    }

    @Test func invalidJSONIsAProtocolViolation() throws {
        let daemon = try FakeDaemon { peer in
            _ = try peer.readRequest()
            peer.send("this is not json")
            _ = try peer.readRequest()
        }
        defer { daemon.stop() }
        let connection = try HalfTunesConnection(socketPath: daemon.socketPath)
        do {
            _ = try connection.call(.daemonStatus, as: DaemonStatus.self)
            Issue.record("the call should have failed")
        } catch HalfTunesClientError.protocolViolation(let detail) {
            #expect(detail.contains("this is not json"))
        }
        connection.close()
    }

    @Test func linesSplitAcrossWritesAndJoinedInOneWriteAreFramedCorrectly() throws {
        let daemon = try FakeDaemon { peer in
            guard let request = try peer.readRequest() else { return }
            guard case .int(let id)? = request["id"] else { return }
            let response = Array(#"{"jsonrpc":"2.0","id":\#(id),"result":"héllo wörld"}"#.utf8) + [10]
            for byte in response.prefix(9) { peer.sendRaw([byte]) }
            let note1 = #"{"jsonrpc":"2.0","method":"other","params":{"n":1}}"#
            let note2 = #"{"jsonrpc":"2.0","method":"other","params":{"n":2}}"#
            peer.sendRaw(Array(response.dropFirst(9)) + Array((note1 + "\n" + note2 + "\n").utf8))
            _ = try peer.readRequest()
        }
        defer { daemon.stop() }
        let connection = try HalfTunesConnection(socketPath: daemon.socketPath)
        let result = try connection.callRaw("x.y", params: JSONValue.object([:]))
        #expect(result == JSONValue.string("héllo wörld"))
        let first = try #require(try connection.nextNotification())
        #expect(first.params == JSONValue.object(["n": JSONValue.int(1)]))
        let second = try #require(try connection.nextNotification())
        #expect(second.params == JSONValue.object(["n": JSONValue.int(2)]))
        connection.close()
        #expect(try connection.nextNotification() == nil)
    }

    /// Waiting with a timeout: nothing in time leaves the connection usable (a call goes on), a notification comes
    /// when it is sent, and the end of the stream is `closed`.
    @Test func waitingForANotificationWithATimeout() throws {
        let daemon = try FakeDaemon { peer in
            guard let request = try peer.readRequest() else { return }
            peer.respond(to: request, result: #"{"sessions":[]}"#)
            peer.send(#"{"jsonrpc":"2.0","method":"agent.launch","params":{"session":"s","unit":"u.service"}}"#)
            _ = try peer.readRequest() // until the client closes
        }
        defer { daemon.stop() }
        let connection = try HalfTunesConnection(socketPath: daemon.socketPath, callTimeout: 5)
        guard case .timedOut = try connection.nextNotification(timeout: 0.05) else {
            Issue.record("expected a timeout before anything was sent")
            return
        }
        #expect(try connection.call(.sessionList, as: SessionListResult.self).sessions.isEmpty)
        guard case .notification(let n) = try connection.nextNotification(timeout: 5) else {
            Issue.record("expected the notification")
            return
        }
        #expect(n.method == "agent.launch" && n.params["unit"] == .string("u.service"))
        connection.close()
        guard case .closed = try connection.nextNotification(timeout: 5) else {
            Issue.record("expected the end")
            return
        }
    }

    @Test func closeUnblocksAThreadWaitingForNotifications() throws {
        let daemon = try FakeDaemon { peer in
            _ = try peer.readRequest() // keeps the connection open and silent until the client closes it
        }
        defer { daemon.stop() }
        let connection = try HalfTunesConnection(socketPath: daemon.socketPath)
        let outcome = Recorder<String>()
        BackgroundThread.start {
            outcome.append("waiting")
            do {
                let notification = try connection.nextNotification()
                outcome.append(notification == nil ? "nil" : "notification")
            } catch {
                outcome.append("error: \(error)")
            }
        }
        #expect(waitUntil { outcome.all.contains("waiting") })
        connection.close()
        #expect(waitUntil { outcome.all.count == 2 })
        #expect(outcome.all.last == "nil")
        #expect(throws: HalfTunesClientError.connectionClosed) { try connection.callRaw("daemon.status", params: nil) }
    }
}
