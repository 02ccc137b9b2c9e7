import Testing
@testable import HalfTunesKit

@Suite(.timeLimit(.minutes(1)))
struct EventStreamTests {
    static let script: [Event] = [
        sampleEvent(seq: 4, task: 1, .stateChanged(state: .running, previous: .queued, reason: nil)),
        sampleEvent(seq: 5, task: 1, .didResumeAtOffset(offset: 500, expectedTotalBytes: 1000, discardedBytes: nil, reason: nil)),
        sampleEvent(seq: nil, task: nil, .didFinishEvents(through: 5)),
        sampleEvent(seq: nil, task: 1, .didWriteData(bytesWritten: 500, totalBytesWritten: 1000, totalBytesExpectedToWrite: 1000)),
        sampleEvent(seq: 6, task: 1, .didFinishDownloading(location: "/tmp/file-1")),
        sampleEvent(seq: 7, task: 1, .didComplete(error: nil)),
    ]

    /// Answers events.subscribe, sends the script (with an unknown event type and a foreign
    /// notification mixed in, which readers skip), then closes.
    static func subscriptionDaemon(requests: Recorder<JSONValue>) throws -> FakeDaemon {
        try FakeDaemon { peer in
            guard let request = try peer.readRequest() else { return }
            requests.append(request)
            peer.respond(to: request, result: #"{"session":"s","after":3,"prunedThrough":2}"#)
            for (index, event) in script.enumerated() {
                try peer.send(event: event)
                if index == 1 {
                    peer.send(#"{"jsonrpc":"2.0","method":"event","params":{"type":"fromTheFuture","session":"s"}}"#)
                    peer.send(#"{"jsonrpc":"2.0","method":"somethingElse","params":{}}"#)
                }
            }
        }
    }

    @Test func nextEventYieldsEventsInOrderAndEndsAtEOF() throws {
        let requests = Recorder<JSONValue>()
        let daemon = try Self.subscriptionDaemon(requests: requests)
        defer { daemon.stop() }
        let client = try HalfTunesClient(socketPath: daemon.socketPath)
        let stream = try client.events(session: "s", after: 3)
        #expect(stream.subscription.prunedThrough == 2)
        #expect(stream.session == "s")
        var received: [Event] = []
        while let event = try stream.nextEvent() { received.append(event) }
        #expect(received == Self.script)
        #expect(requests.all.first?["method"] == .string("events.subscribe"))
        #expect(requests.all.first?["params"] == .object(["session": .string("s"), "after": .int(3)]))
        // The subscription used its own connection, not the client's.
        #expect(daemon.acceptedConnections == 2)
    }

    @Test func asyncIterationYieldsEventsInOrderAndEndsAtEOF() async throws {
        let daemon = try Self.subscriptionDaemon(requests: Recorder())
        defer { daemon.stop() }
        let stream = try HalfTunesClient(socketPath: daemon.socketPath).events(session: "s", after: 3)
        var received: [Event] = []
        for try await event in stream { received.append(event) }
        #expect(received == Self.script)
    }

    @Test func leavingAnAsyncIterationClosesTheConnection() async throws {
        let ended = Recorder<Bool>()
        let daemon = try FakeDaemon { peer in
            guard let request = try peer.readRequest() else { return }
            peer.respond(to: request, result: #"{"session":"s","after":0,"prunedThrough":0}"#)
            try peer.send(event: sampleEvent(seq: nil, task: nil, .didFinishEvents(through: 0)))
            // Stays silent; the client must hang up by itself.
            ended.append(try peer.readRequest() == nil)
        }
        defer { daemon.stop() }
        let stream = try HalfTunesClient(socketPath: daemon.socketPath).events(session: "s")
        for try await event in stream {
            #expect(event.type == "didFinishEvents")
            break
        }
        #expect(waitUntil { ended.all == [true] })
    }

    @Test func closeEndsABlockedNextEvent() throws {
        let daemon = try FakeDaemon { peer in
            guard let request = try peer.readRequest() else { return }
            peer.respond(to: request, result: #"{"session":"s","after":0,"prunedThrough":0}"#)
            _ = try peer.readRequest()
        }
        defer { daemon.stop() }
        let stream = try HalfTunesClient(socketPath: daemon.socketPath).events(session: "s")
        let outcome = Recorder<String>()
        BackgroundThread.start {
            outcome.append("waiting")
            outcome.append((try? stream.nextEvent()) == nil ? "ended" : "event")
        }
        #expect(waitUntil { outcome.all.contains("waiting") })
        stream.close()
        #expect(waitUntil { outcome.all == ["waiting", "ended"] })
    }

    @Test func aMalformedEventIsAProtocolViolation() throws {
        let daemon = try FakeDaemon { peer in
            guard let request = try peer.readRequest() else { return }
            peer.respond(to: request, result: #"{"session":"s","after":0,"prunedThrough":0}"#)
            peer.send(#"{"jsonrpc":"2.0","method":"event","params":{"type":"didComplete"}}"#)
        }
        defer { daemon.stop() }
        let stream = try HalfTunesClient(socketPath: daemon.socketPath).events(session: "s")
        do {
            _ = try stream.nextEvent()
            Issue.record("a malformed event should throw")
        } catch HalfTunesClientError.protocolViolation(let detail) {
            #expect(detail.contains("malformed event"))
        }
    }
}
