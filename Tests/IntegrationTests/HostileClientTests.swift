import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Malformed frames, fuzzed frames, silent and slow clients against the live daemon (issue 5).
@Suite("Hostile clients on the control socket")
struct HostileClientTests {
    /// Every kind of malformed frame gets the right JSON-RPC error on the same connection, and the
    /// daemon then still completes a normal download.
    @Test func aBatteryOfMalformedFramesGetsTheRightErrors() async throws {
        try await withDaemon { daemon, origin in
            let s = try RawSocket(path: daemon.socketPath)
            func code(_ frame: [UInt8]) throws -> Int? {
                try s.send(frame + [UInt8(ascii: "\n")])
                return try #require(try s.readObject()).errorCode
            }
            func code(_ frame: String) throws -> Int? { try code(Array(frame.utf8)) }
            #expect(try code([0xFF, 0xFE, 0x7B, 0x7D]) == -32700)                        // invalid UTF-8
            #expect(try code(#"{"jsonrpc":"2.0","id":1,"method":"daemon.status","x":"\#u{FFFD}"#) == -32700) // unterminated
            #expect(try code(String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)) == -32700)
            #expect(try code(String(repeating: #"{"a":"#, count: 50_000) + "1" + String(repeating: "}", count: 50_000)) == -32700)
            #expect(try code(#"{"jsonrpc":"2.0","id":1,"method":"task.list","params":{"session":"#
                + String(repeating: "[", count: 5_000) + String(repeating: "]", count: 5_000) + "}}") == -32700)
            // Members a request does not have are refused, like unknown params fields.
            #expect(try code(#"{"jsonrpc":"2.0","id":1,"method":"daemon.status","extra":1}"#) == -32600)
            #expect(try code(#"{"jsonrpc":"2.0","id":1,"method":"daemon.status","Params":{}}"#) == -32600)
            // A number no JSON parser can represent is a parse error; a representable non-integer id is invalid.
            #expect(try [-32700, -32600].contains(code(#"{"jsonrpc":"2.0","id":1e999,"method":"daemon.status"}"#)))
            #expect(try code(#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"daemon.status"}"#) == -32600)
            #expect(try code(#"{"jsonrpc":"2.0","id":2,"method":"task.get","params":{"id":1e300}}"#) == -32602)
            #expect(try code(#"{"jsonrpc":"2.0","id":3,"method":"task.get","params":{"id":99999999999999999999999}}"#) == -32602)
            #expect(try code(#"{"jsonrpc":"2.0","id":4,"method":"task.get","params":{"id":-1}}"#) == -32002)
            #expect(try code(#"{"jsonrpc":2,"id":5,"method":"daemon.status"}"#) == -32600)
            #expect(try code(#"{"id":6,"method":"daemon.status"}"#) == -32600)
            #expect(try code(#"{"jsonrpc":"2.0","id":7,"method":null}"#) == -32600)
            #expect(try code(#"{"jsonrpc":"2.0","id":8,"method":42}"#) == -32600)
            #expect(try code(#"{"jsonrpc":"2.0","id":[1],"method":"daemon.status"}"#) == -32600)
            #expect(try code(#"{"jsonrpc":"2.0","id":9,"method":"daemon.status","params":"all"}"#) == -32602)
            #expect(try code(#"{"jsonrpc":"2.0","id":10,"method":"daemon.status","params":{"verbose":true}}"#) == -32602)
            #expect(try code(#"{"jsonrpc":"2.0","id":11,"method":"session.open","params":{"identifier":7}}"#) == -32602)
            #expect(try code(#"{"jsonrpc":"2.0","id":12,"method":"session.open","params":{"identifier":"a","configuration":{"requestTimeout":"x"}}}"#) == -32602)
            #expect(try code(#"{"jsonrpc":"2.0","id":13,"method":"task.create","params":{"session":"nope","url":"http://h/f","extra":1}}"#) == -32602)
            #expect(try code(#"{}"#) == -32600)
            #expect(try code(#""just a string""#) == -32600)
            #expect(try code("null") == -32600)
            #expect(try code(#"{"jsonrpc":"2.0","id":14,"method":"task.list","params":{"state":"exploded"}}"#) == -32602)
            // Session identifiers: 1-255 ASCII letters, digits and . _ - @ + :, starting with a letter or digit.
            func open(_ identifier: String) throws -> Int? {
                try code(#"{"jsonrpc":"2.0","id":19,"method":"session.open","params":{"identifier":"\#(identifier)"}}"#)
            }
            for bad in ["", String(repeating: "a", count: 256), ".hidden", "-dash", "a b", "tab\\tname", "ünï", "semi;colon",
                        "quote'", "nul\\u0000", "+1000/x", "01000/x", "0/", "/x", "1/2/3"] {
                #expect(try open(bad) == -32602, "identifier '\(bad)' was accepted")
            }
            for good in [String(repeating: "a", count: 255), "9lives", "com.example.app_1-2@host+x:y", "0/root.named"] {
                #expect(try open(good) == nil, "identifier '\(good)' was refused")
            }
            _ = try code(#"{"jsonrpc":"2.0","id":15,"method":"session.open","params":{"identifier":"battery"}}"#)
            for url in ["file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://h/x", "http:///nohost", "javascript:alert(1)"] {
                #expect(try code(#"{"jsonrpc":"2.0","id":16,"method":"task.create","params":{"session":"battery","url":"\#(url)"}}"#) == -32602, "\(url)")
            }
            #expect(try code(#"{"jsonrpc":"2.0","id":17,"method":"task.create","params":{"session":"battery","url":"http://h/f","headers":{"X-A":"1\r\nX-Injected: 2"}}}"#) == -32602)
            #expect(try code(#"{"jsonrpc":"2.0","id":18,"method":"task.create","params":{"session":"battery","url":"http://h/f","headers":{"X\nB":"1"}}}"#) == -32602)
            // The connection is still in order: a normal request is answered.
            try s.send(#"{"jsonrpc":"2.0","id":"ok","method":"daemon.status"}"# + "\n")
            #expect(try s.readObject()?["id"] as? String == "ok")
            #expect(daemon.isRunning)

            let body = TestOrigin.randomBytes(count: 300_000, seed: 51)
            origin.put("/battery.bin", body)
            let client = try daemon.client()
            let t = try client.startDownload(origin.url("/battery.bin"))
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location ?? "") == TestOrigin.sha256Hex(body))
        }
    }

    /// Thousands of random and mutated frames (fixed seed): after each one the daemon still answers a
    /// sentinel request on the same connection (or closed it, and a new connection works).
    @Test func fuzzedFramesNeverCrashTheDaemon() async throws {
        try await withDaemon { daemon, origin in
            var rng = SplitMix64(seed: 0x5EED_F022)
            let seeds: [String] = [
                #"{"jsonrpc":"2.0","id":1,"method":"daemon.status"}"#,
                #"{"jsonrpc":"2.0","id":2,"method":"session.open","params":{"identifier":"fz","configuration":{"requestTimeout":5,"headers":{"A":"b"}}}}"#,
                #"{"jsonrpc":"2.0","id":3,"method":"task.create","params":{"session":"fz","url":"http://127.0.0.1:9/x","destination":"x"}}"#,
                #"{"jsonrpc":"2.0","id":4,"method":"task.list","params":{"session":"fz","state":"suspended"}}"#,
                #"{"jsonrpc":"2.0","id":5,"method":"task.cancel","params":{"id":1,"produceResumeData":true}}"#,
                #"{"jsonrpc":"2.0","id":6,"method":"events.ack","params":{"session":"fz","through":0}}"#,
                #"{"jsonrpc":"2.0","id":7,"method":"task.get","params":{"id":1}}"#,
            ]
            var socket = try RawSocket(path: daemon.socketPath)
            var answered = 0
            for i in 0..<3000 {
                var frame = Array(seeds[Int(rng.next() % UInt64(seeds.count))].utf8)
                switch rng.next() % 4 {
                case 0: // flip bytes
                    for _ in 0..<(1 + rng.next() % 4) { frame[Int(rng.next() % UInt64(frame.count))] = UInt8(truncatingIfNeeded: rng.next()) }
                case 1: // truncate
                    frame = Array(frame.prefix(Int(rng.next() % UInt64(frame.count))))
                case 2: // random bytes
                    frame = (0..<(rng.next() % 200)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                default: // splice two frames
                    let other = Array(seeds[Int(rng.next() % UInt64(seeds.count))].utf8)
                    frame = Array(frame.prefix(Int(rng.next() % UInt64(frame.count)))) + other.suffix(Int(rng.next() % UInt64(other.count)))
                }
                frame.removeAll { $0 == UInt8(ascii: "\n") }
                let sentinel = "s\(i)"
                do {
                    try socket.send(frame + Array("\n{\"jsonrpc\":\"2.0\",\"id\":\"\(sentinel)\",\"method\":\"daemon.status\"}\n".utf8))
                    var found = false
                    while let obj = try socket.readObject() {
                        if obj["id"] as? String == sentinel { found = true; break }
                    }
                    if found { answered += 1 } else { socket = try RawSocket(path: daemon.socketPath) }
                } catch {
                    socket = try RawSocket(path: daemon.socketPath)
                }
                #expect(daemon.isRunning, "daemon died after frame \(i): \(frame)")
                if !daemon.isRunning { return }
            }
            #expect(answered > 2900)
            _ = try daemon.client().status()
        }
    }

    /// While a client that sends nothing, one that sends only blank lines, one that sends a byte at a time
    /// without ever finishing its line, and one that never reads its replies are all connected, a normal
    /// client's calls stay fast: each answered well within a small bound (far below the client timeout, so
    /// a daemon that stalled until the slow clients were dropped would fail). Then the silent ones are
    /// dropped after the client timeout and the greedy one once its output piles up.
    @Test func silentSlowLorisAndNonReadingClientsDoNotDelayOthers() async throws {
        try await withDaemon(["--client-timeout", "5", "--max-pending-output", "65536"]) { daemon, origin in
            let client = try daemon.client()
            _ = try client.openSession("busy")
            for i in 0..<100 { _ = try client.createTask(TaskCreateParams(session: "busy", url: "http://127.0.0.1:9/\(i)", destination: "b\(i)")) }
            let silent = try RawSocket(path: daemon.socketPath)
            let blank = try RawSocket(path: daemon.socketPath)
            let slow = try RawSocket(path: daemon.socketPath)
            let greedy = try RawSocket(path: daemon.socketPath)
            let started = Date()
            let dripping = Task.detached {
                for byte in Array(#"{"jsonrpc":"2.0","id":1,"method":"daemon.status"}"#.utf8) {
                    guard (try? slow.send([byte])) != nil else { return }
                    try? blank.send(Array("\n".utf8))
                    try? await Task.sleep(for: .milliseconds(100))
                }
            }
            defer { dripping.cancel() }
            // The greedy client asks for ~50 KiB answers and never reads them.
            let list = Array((#"{"jsonrpc":"2.0","id":1,"method":"task.list"}"# + "\n").utf8)
            var calls: [Double] = []
            var greedySent = 0
            // Measure for 3 s: every slow client is still connected (the timeout is 5 s).
            while Date().timeIntervalSince(started) < 3 {
                if greedySent < 400, (try? greedy.send(list)) != nil { greedySent += 1 }
                let start = Date()
                _ = try client.status()
                _ = try client.tasks(session: "busy")
                calls.append(Date().timeIntervalSince(start))
            }
            #expect(!silent.peerClosed(within: 0) && !blank.peerClosed(within: 0) && !slow.peerClosed(within: 0),
                    "the slow clients were dropped before the measurement ended; it measured nothing")
            let slowest = calls.max() ?? .infinity
            #expect(calls.count > 20 && slowest < 0.5,
                    "\(calls.count) calls, slowest \(slowest) s, while silent, blank-line, slow-loris and non-reading clients were connected")
            #expect(greedy.peerClosed(within: 30), "the client that never reads was not dropped")
            #expect(silent.peerClosed(within: 30))
            #expect(blank.peerClosed(within: 30), "blank lines kept a client that asks nothing connected")
            #expect(slow.peerClosed(within: 30))
            // A client that asked something may then stay idle; the Kit client reconnects if needed.
            #expect(try client.status().pid == daemon.pid)
        }
    }

    /// 10,000 requests pipelined in one burst are all answered, in order: the daemon stops reading
    /// while too many are queued instead of buffering them all, and never deadlocks doing so.
    @Test func pipelinedRequestsAreAllAnsweredInOrder() async throws {
        try await withDaemon { daemon, origin in
            let s = try RawSocket(path: daemon.socketPath)
            var burst: [UInt8] = []
            for i in 0..<10_000 { burst += Array((#"{"jsonrpc":"2.0","id":\#(i),"method":"daemon.status"}"# + "\n").utf8) }
            try s.send(burst)
            for i in 0..<10_000 {
                let answer = try #require(try s.readObject(), "no answer to request \(i)")
                #expect(answer["id"] as? Int == i)
                if answer["id"] as? Int != i { return }
            }
        }
    }

    /// Forty requests of almost 1 MiB each, pipelined: the daemon stops reading once a few MiB of them are
    /// queued (instead of holding all of them), reads on as it answers, and answers every one in order.
    @Test func pipelinedLargeRequestsAreAllAnsweredInOrder() async throws {
        try await withDaemon { daemon, origin in
            let s = try RawSocket(path: daemon.socketPath)
            let filler = String(repeating: "x", count: 1_000_000)
            let writer = Task.detached {
                for i in 0..<40 {
                    try s.send(#"{"jsonrpc":"2.0","id":\#(i),"method":"session.open","params":{"identifier":"big\#(i)","pad":"\#(filler)"}}"# + "\n")
                }
            }
            for i in 0..<40 {
                let answer = try #require(try s.readObject(), "no answer to request \(i)")
                #expect(answer["id"] as? Int == i && answer.errorCode == -32602, "\(answer)")
                if answer["id"] as? Int != i { return }
            }
            try await writer.value
            #expect(try daemon.client().status().pid == daemon.pid)
        }
    }

    /// A client that sends requests but never reads the responses is disconnected once its unsent
    /// output passes the limit; others are served throughout.
    @Test func aClientThatNeverReadsIsDropped() async throws {
        try await withDaemon(["--max-pending-output", "65536"]) { daemon, origin in
            let greedy = try RawSocket(path: daemon.socketPath)
            let request = Array((#"{"jsonrpc":"2.0","id":1,"method":"task.list"}"# + "\n").utf8)
            let client = try daemon.client()
            _ = try client.openSession("greedy")
            for i in 0..<200 { _ = try client.createTask(TaskCreateParams(session: "greedy", url: "http://127.0.0.1:9/\(i)", destination: "g\(i)")) }
            // Each task.list answer is ~100 KiB: the output limit is passed within a few requests.
            var sent = 0
            while sent < 2000, (try? greedy.send(request)) != nil, !greedy.peerClosed(within: 0) { sent += 1 }
            #expect(greedy.peerClosed(within: 30))
            #expect(try client.status().pid == daemon.pid)
        }
    }
}

/// A small deterministic generator for reproducible fuzzing.
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("Resume data against the live daemon")
struct ResumeDataForgeryTests {
    /// Resume data with a changed byte (or made up) is refused and changes nothing; the genuine
    /// string still works afterwards, exactly once.
    @Test func forgedResumeDataIsRefused() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 3 * MiB, seed: 52)
            origin.put("/forge.bin", body)
            origin.setBehavior("/forge.bin", .throttled(1 * MiB))
            let client = try daemon.client()
            let t = try client.startDownload(origin.url("/forge.bin"), session: "forge")
            try eventually("some bytes durable") { try client.task(t.id).bytesDurable > 0 ? true : nil }
            let genuine = try #require(try client.cancel(t.id, produceResumeData: true).resumeData)
            var bytes = Array(genuine.utf8)
            bytes[bytes.count / 2] = bytes[bytes.count / 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            for forged in [String(decoding: bytes, as: UTF8.self), genuine + "AA", "eyJ2IjoyfQ"] {
                #expect(throws: HalfTunesClientError.self) {
                    try client.createTask(TaskCreateParams(session: "forge", resumeData: forged, start: true))
                }
            }
            origin.setBehavior("/forge.bin", TestOrigin.Behavior())
            let resumed = try client.createTask(TaskCreateParams(session: "forge", resumeData: genuine, start: true))
            let done = try client.waitFor(task: resumed.id, state: .completed)
            #expect(try sha256(ofFile: done.location ?? "") == TestOrigin.sha256Hex(body))
            #expect(throws: HalfTunesClientError.self) {
                try client.createTask(TaskCreateParams(session: "forge", resumeData: genuine, start: true))
            }
        }
    }
}

@Suite("Resource caps")
struct ResourceCapTests {
    /// One uid may hold at most 64 connections; the next is told why and closed; closing one makes room.
    @Test func connectionsPerUIDAreCapped() async throws {
        try await withDaemon { daemon, origin in
            var admitted: [RawSocket] = []
            var refusal: [String: Any]?
            for i in 0..<80 {
                let s = try RawSocket(path: daemon.socketPath)
                try s.send(#"{"jsonrpc":"2.0","id":\#(i),"method":"daemon.status"}"# + "\n")
                let answer = try #require(try s.readObject())
                if answer["result"] != nil { admitted.append(s); continue }
                refusal = answer
                #expect(try s.readObject() == nil)
                break
            }
            #expect(refusal?.errorCode == -32009)
            #expect(refusal?.errorMessage?.contains("at most 64") == true)
            #expect(admitted.count <= 64 && admitted.count >= 60)
            admitted.removeLast(2)
            try eventually("a connection is admitted again") {
                let s = try RawSocket(path: daemon.socketPath)
                try s.send(#"{"jsonrpc":"2.0","id":"again","method":"daemon.status"}"# + "\n")
                return try s.readObject()?["result"] != nil ? true : nil
            }
        }
    }

    /// A session with too many unfinished tasks, or too many unacknowledged events, accepts no new task
    /// (and says what frees it); acknowledging events or finishing tasks makes room. Nothing is dropped.
    @Test func tasksAndUnacknowledgedEventsPerSessionAreCapped() async throws {
        try await withDaemon(["--max-tasks-per-session", "5", "--max-pending-events", "12"]) { daemon, origin in
            let client = try daemon.client()
            _ = try client.openSession("caps")
            var ids: [Int64] = []
            for i in 0..<5 { ids.append(try client.createTask(TaskCreateParams(session: "caps", url: "http://127.0.0.1:9/\(i)", destination: "c\(i)")).id) }
            do {
                _ = try client.createTask(TaskCreateParams(session: "caps", url: "http://127.0.0.1:9/x", destination: "cx"))
                Issue.record("a sixth unfinished task was accepted")
            } catch HalfTunesClientError.rpc(let e) {
                #expect(e.code == RPCErrorCode.limitExceeded.rawValue)
                #expect(e.message.contains("5 unfinished tasks"))
            }
            // Canceling finishes tasks: room for more, until the unacknowledged events pile up.
            for id in ids { _ = try client.cancel(id) }
            let pending = try client.session("caps").lastEventSeq
            #expect(pending >= 12)
            do {
                _ = try client.createTask(TaskCreateParams(session: "caps", url: "http://127.0.0.1:9/y", destination: "cy"))
                Issue.record("a task was accepted past the unacknowledged-event cap")
            } catch HalfTunesClientError.rpc(let e) {
                #expect(e.code == RPCErrorCode.limitExceeded.rawValue)
                #expect(e.message.contains("events.ack"))
            }
            // Every event is still there to replay; acknowledging them makes room.
            let replay = try EventRecorder(client: client, session: "caps", after: 0)
            _ = try replay.wait(for: "replay") { $0.isDidFinishEvents }
            #expect(replay.all.compactMap(\.seq).count == Int(pending))
            _ = try client.ack(session: "caps", through: pending)
            _ = try client.createTask(TaskCreateParams(session: "caps", url: "http://127.0.0.1:9/z", destination: "cz"))
        }
    }

    /// One uid's unfinished tasks are capped across all its sessions (`max-tasks-per-uid`), so the per-session
    /// cap cannot be multiplied by opening sessions; finishing a task makes room, and the count is rebuilt
    /// from the journal after a kill -9.
    @Test func unfinishedTasksPerUIDAreCappedAcrossSessions() async throws {
        try await withDaemon(["--max-tasks-per-uid", "4", "--max-tasks-per-session", "3"]) { daemon, origin in
            var client = try daemon.client()
            for s in ["u1", "u2", "u3"] { _ = try client.openSession(s) }
            var ids: [Int64] = []
            for (i, s) in ["u1", "u1", "u2", "u3"].enumerated() {
                ids.append(try client.createTask(TaskCreateParams(session: s, url: "http://127.0.0.1:9/\(i)", destination: "p\(i)")).id)
            }
            func expectRefused(_ session: String, _ label: String) throws {
                do {
                    _ = try client.createTask(TaskCreateParams(session: session, url: "http://127.0.0.1:9/\(label)", destination: label))
                    Issue.record("a fifth unfinished task of one uid was accepted in \(session)")
                } catch HalfTunesClientError.rpc(let e) {
                    #expect(e.code == RPCErrorCode.limitExceeded.rawValue)
                    #expect(e.message.contains("4 unfinished tasks across its sessions"), "\(e.message)")
                }
            }
            try expectRefused("u3", "x")     // u3 holds one task, far below the per-session cap
            daemon.kill9()
            try daemon.restart()
            client = try daemon.client()
            try expectRefused("u2", "y")     // recovered from the journal, not reset by the restart
            _ = try client.cancel(ids[0])    // finished: room for one more, in any session of the uid
            _ = try client.createTask(TaskCreateParams(session: "u3", url: "http://127.0.0.1:9/z", destination: "z"))
            try expectRefused("u1", "w")
        }
    }

    /// One uid's unacknowledged events are capped across its sessions (`max-pending-events-per-uid`); the
    /// count survives a kill -9 (rebuilt from the journal), and acknowledging in either session makes room.
    @Test func unacknowledgedEventsPerUIDAreCappedAcrossSessions() async throws {
        try await withDaemon(["--max-pending-events-per-uid", "10", "--max-pending-events", "1000"]) { daemon, origin in
            var client = try daemon.client()
            for s in ["e1", "e2"] { _ = try client.openSession(s) }
            var created = 0
            func create(_ session: String) throws -> Bool {
                do {
                    _ = try client.createTask(TaskCreateParams(session: session, url: "http://127.0.0.1:9/\(created)", destination: "e\(created)"))
                    created += 1
                    return true
                } catch HalfTunesClientError.rpc(let e) {
                    #expect(e.code == RPCErrorCode.limitExceeded.rawValue)
                    #expect(e.message.contains("unacknowledged events across its sessions"), "\(e.message)")
                    return false
                }
            }
            while try create(created % 2 == 0 ? "e1" : "e2") { try #require(created < 50, "the per-uid event cap never applied") }
            let pending1 = try client.session("e1").lastEventSeq
            #expect(created >= 2, "both sessions took tasks before the cap")
            daemon.kill9()
            try daemon.restart()
            client = try daemon.client()
            #expect(try !create("e2"), "the count was lost in the restart")
            // Acknowledging one session's events makes room in the other one too.
            _ = try client.ack(session: "e1", through: pending1)
            #expect(try create("e2"))
        }
    }

    /// One uid may hold at most `max-sessions-per-uid` sessions; re-attaching to one it has is fine, and
    /// invalidating one makes room.
    @Test func sessionsPerUIDAreCapped() async throws {
        try await withDaemon(["--max-sessions-per-uid", "3"]) { daemon, origin in
            let client = try daemon.client()
            for i in 0..<3 { _ = try client.openSession("s\(i)") }
            do {
                _ = try client.openSession("s3")
                Issue.record("a fourth session was accepted")
            } catch HalfTunesClientError.rpc(let e) {
                #expect(e.code == RPCErrorCode.limitExceeded.rawValue && e.message.contains("3 sessions"), "\(e)")
            }
            #expect(try client.openSession("s1").reattached)
            #expect(try client.invalidateSession("s0", cancelTasks: true).invalidated)
            #expect(try client.openSession("s3").reattached == false)
        }
    }

    /// One connection may hold at most 16 subscriptions.
    @Test func subscriptionsPerConnectionAreCapped() async throws {
        try await withDaemon { daemon, origin in
            let client = try daemon.client()
            let s = try RawSocket(path: daemon.socketPath)
            func subscribe(_ i: Int) throws -> [String: Any] {
                try s.send(#"{"jsonrpc":"2.0","id":\#(i),"method":"events.subscribe","params":{"session":"sub\#(i)"}}"# + "\n")
                while let obj = try s.readObject() { if obj["id"] as? Int == i { return obj } }
                throw TestFailure("connection closed")
            }
            for i in 0..<17 { _ = try client.openSession("sub\(i)") }
            for i in 0..<16 { #expect(try subscribe(i)["result"] != nil) }
            let refused = try subscribe(16)
            #expect(refused.errorCode == -32009)
            // Subscribing again to a session it already follows is not a new subscription.
            #expect(try subscribe(3)["result"] != nil)
        }
    }
}
