import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Control protocol against the live daemon")
struct LiveProtocolTests {
    @Test func everyBadInputGetsTheRightErrorAndTheDaemonKeepsServing() async throws {
        try await withDaemon { daemon, origin in
            let s = try RawSocket(path: daemon.socketPath)
            func call(_ line: String) throws -> [String: Any] {
                try s.send(line + "\n")
                return try #require(try s.readObject())
            }
            #expect(try call("this is not json").errorCode == -32700)
            #expect(try call("[1,2]").errorCode == -32600)
            #expect(try call(#"{"jsonrpc":"1.0","id":1,"method":"daemon.status"}"#).errorCode == -32600)
            let unknown = try call(#"{"jsonrpc":"2.0","id":2,"method":"task.explode"}"#)
            #expect(unknown.errorCode == -32601)
            #expect(unknown["id"] as? Int == 2)
            let badParams = try call(#"{"jsonrpc":"2.0","id":3,"method":"task.get","params":{"id":"seven"}}"#)
            #expect(badParams.errorCode == -32602)
            #expect(badParams.errorMessage?.contains("id") == true)
            let missing = try call(#"{"jsonrpc":"2.0","id":4,"method":"task.create","params":{"url":"http://x/y"}}"#)
            #expect(missing.errorCode == -32602)
            #expect(missing.errorMessage?.contains("session") == true)
            #expect(try call(#"{"jsonrpc":"2.0","id":5,"method":"task.get","params":{"id":424242}}"#).errorCode == -32002)
            #expect(try call(#"{"jsonrpc":"2.0","id":6,"method":"events.subscribe","params":{"session":"nobody"}}"#).errorCode == -32001)
            _ = try call(#"{"jsonrpc":"2.0","id":7,"method":"session.open","params":{"identifier":"p"}}"#)
            let ftp = try call(#"{"jsonrpc":"2.0","id":8,"method":"task.create","params":{"session":"p","url":"ftp://h/f"}}"#)
            #expect(ftp.errorCode == -32602)
            let crlf = try call(#"{"jsonrpc":"2.0","id":9,"method":"task.create","params":{"session":"p","url":"http://h/f","headers":{"X":"a\r\nB: c"}}}"#)
            #expect(crlf.errorCode == -32602)
            // A notification (no id) gets no answer; the next request is answered normally.
            try s.send(#"{"jsonrpc":"2.0","method":"daemon.status"}"# + "\n")
            let status = try call(#"{"jsonrpc":"2.0","id":"last","method":"daemon.status"}"#)
            #expect(status["id"] as? String == "last")
            #expect((status["result"] as? [String: Any])?["version"] as? String == HalfTunes.version)

            // An over-long line is refused and the connection closed; others are unaffected.
            let huge = try RawSocket(path: daemon.socketPath)
            try huge.send([UInt8](repeating: UInt8(ascii: "a"), count: HalfTunes.maxLineBytes + 10))
            #expect(try huge.readObject()?.errorCode == -32700)
            #expect(try huge.readObject() == nil)

            // And a real download still works.
            origin.put("/after.bin", TestOrigin.randomBytes(count: 2000, seed: 40))
            let client = try daemon.client()
            let t = try client.startDownload(origin.url("/after.bin"))
            try client.waitFor(task: t.id, state: .completed)
        }
    }

    @Test func statusReportsCountsAndTheCLIExplainsAMissingDaemon() async throws {
        try await withDaemon { daemon, origin in
            let status = try daemon.client().status()
            #expect(status.pid == daemon.pid)
            #expect(status.tasks.keys.count == TaskState.allCases.count)
            let human = try ctl(["status"], socket: daemon.socketPath)
            #expect(human.status == 0)
            #expect(human.stdout.contains(HalfTunes.version))
            try daemon.terminate()
            let down = try ctl(["status"], socket: daemon.socketPath)
            #expect(down.status == 69)
            #expect(down.stderr.contains("not running"))
        }
    }

    @Test func sessionsCanBeInvalidated() async throws {
        try await withDaemon { daemon, origin in
            origin.put("/inv.bin", TestOrigin.randomBytes(count: 4 * MiB, seed: 41))
            origin.setBehavior("/inv.bin", .throttled(1 * MiB))
            let client = try daemon.client()
            let t = try client.startDownload(origin.url("/inv.bin"), session: "inv")
            try client.waitFor(task: t.id, state: .running)
            let r = try client.invalidateSession("inv", cancelTasks: true)
            #expect(r.remainingTasks == 0)
            try eventually("session gone") { try client.sessions().contains { $0.identifier == "inv" } ? nil : true }
            try eventually("partial removed") { partialFiles(in: daemon.downloadsDir).isEmpty ? true : nil }
            // The identifier can be used again.
            #expect(try client.openSession("inv").reattached == false)
        }
    }
}

@Suite("Clients that misbehave")
struct MisbehavingClientTests {
    /// A subscriber that never reads its replay is disconnected after the client timeout; the daemon
    /// keeps serving others, the subscriber can re-subscribe from its last seq, and a subscriber that
    /// reads gets a replay many times the output limit.
    @Test func aSubscriberThatStopsReadingIsDroppedAndCanResubscribe() async throws {
        try await withDaemon(["--max-pending-output", "65536", "--client-timeout", "2"]) { daemon, origin in
            let client = try daemon.client()
            _ = try client.openSession("lag")
            // Journal plenty of events: each task creation and cancellation journals three or four.
            for i in 0..<400 {
                let t = try client.createTask(TaskCreateParams(session: "lag", url: "http://127.0.0.1:9/f\(i)",
                                                               destination: "f\(i)"))
                _ = try client.cancel(t.id)
            }
            let total = try client.session("lag").lastEventSeq
            let lagging = try RawSocket(path: daemon.socketPath)
            try lagging.send(#"{"jsonrpc":"2.0","id":1,"method":"events.subscribe","params":{"session":"lag","after":0}}"# + "\n")
            // While it does not read, others are served.
            for _ in 0..<20 { _ = try client.status() }
            // The replay waits for it to read, then gives up on it (--client-timeout 2).
            #expect(lagging.peerClosed(within: 60))
            // Now read what was delivered before the daemon gave up on it: a prefix, then EOF.
            var lastSeq: Int64 = 0
            var sawFinish = false
            while let obj = try lagging.readObject() {
                guard let params = obj["params"] as? [String: Any] else { continue }
                if let seq = params["seq"] as? Int { lastSeq = Int64(seq) }
                if params["type"] as? String == "didFinishEvents" { sawFinish = true }
            }
            #expect(!sawFinish)
            #expect(lastSeq < total)
            // Re-subscribing from the last seq delivers the rest.
            let again = try EventRecorder(client: client, session: "lag", after: lastSeq)
            let finish = try again.wait(for: "didFinishEvents") { $0.isDidFinishEvents }
            let seqs = again.all.compactMap(\.seq)
            #expect(seqs.first == lastSeq + 1 || (lastSeq == 0 && seqs.first == 1))
            #expect(seqs.last == total)
            if case .didFinishEvents(let through) = finish.payload { #expect(through == total) }
            // A reader gets the whole replay (far over the 64 KiB output limit) through the same limit.
            let whole = try EventRecorder(client: client, session: "lag", after: 0)
            _ = try whole.wait(for: "whole replay") { $0.isDidFinishEvents }
            #expect(whole.all.compactMap(\.seq) == Array(1...total))
        }
    }

    @Test func clientsThatHangUpMidRequestDoNotDisturbTheDaemon() async throws {
        try await withDaemon { daemon, origin in
            let client = try daemon.client()
            _ = try client.openSession("hup")
            for i in 0..<50 {
                let s = try RawSocket(path: daemon.socketPath)
                try s.send(#"{"jsonrpc":"2.0","id":\#(i),"method":"task.create","params":{"session":"hup","url":"http://127.0.0.1:9/x","destination":"hup\#(i)"}}"# + "\n")
                try s.send(#"{"jsonrpc":"2.0","id":"half","method":"daemon.st"#) // and a half-written line
            }
            // Every complete request was carried out; the daemon still answers.
            try eventually("50 tasks") { try client.tasks(session: "hup").count == 50 ? true : nil }
            #expect(try client.status().tasks["suspended"] == 50)
        }
    }
}
