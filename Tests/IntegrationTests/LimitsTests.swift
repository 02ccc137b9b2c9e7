import Foundation
import GRDB
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Per-session and per-host limits hold queued tasks (and say so); limits change at runtime without
/// restarting running transfers, and daemon.setLimits values outlive a restart.
@Suite("Controls: limits")
struct LimitsTests {
    @Test func sessionAndHostLimitsHoldTasksAndChangeLive() async throws {
        try await withDaemon { daemon, origin in
            let other = try await TestOrigin.start()
            do {
                try await Self.holdAndRelease(daemon, origin, other)
            } catch {
                try? await other.shutdown()
                throw error
            }
            try await other.shutdown()
        }
    }

    static func holdAndRelease(_ daemon: DaemonProcess, _ origin: TestOrigin, _ other: TestOrigin) async throws {
        do {
            var stall = TestOrigin.Behavior()
            stall.stallAfterBytes = 4096
            for name in ["s1", "s2", "f1"] {
                origin.put("/\(name)", TestOrigin.randomBytes(count: 256 << 10, seed: 410))
                origin.setBehavior("/\(name)", stall)
            }
            other.put("/o", TestOrigin.randomBytes(count: 1000, seed: 411))
            let client = try daemon.client()
            _ = try client.openSession("limited", configuration: SessionConfiguration(maxConcurrent: 1))
            _ = try client.openSession("free")
            let s1 = try client.createTask(TaskCreateParams(session: "limited", url: origin.url("/s1"), start: true))
            try await origin.waitUntilBytesServed("/s1", atLeast: 4096)
            let s2 = try client.createTask(TaskCreateParams(session: "limited", url: origin.url("/s2"), start: true))
            #expect(s2.state == .queued)
            #expect(s2.hold?.reason == "sessionMaxConcurrent")
            let show = try ctl(["show", String(s2.id)], socket: daemon.socketPath)
            #expect(show.stdout.contains("transfers of session 'limited' running"), "\(show.stdout)")

            let set = try ctl(["limits", "--per-host", "1"], socket: daemon.socketPath)
            #expect(set.status == 0, "\(set.stderr)")
            #expect(set.stdout.contains("per host:        1"))
            let f1 = try client.createTask(TaskCreateParams(session: "free", url: origin.url("/f1"), start: true))
            #expect(f1.state == .queued)
            #expect(f1.hold?.reason == "hostMaxConnections")
            #expect(f1.hold?.message.contains("connections to http://127.0.0.1:\(origin.port)") == true)
            // Another host is not held by this one's limit: it starts (and finishes) past the held tasks.
            let o = try client.createTask(TaskCreateParams(session: "free", url: other.url("/o"), start: true))
            try client.waitFor(task: o.id, state: .completed)

            // Raising the limits starts the held tasks; the running transfer goes on (no new request).
            _ = try client.setLimits(maxConnectionsPerHost: 6)
            try client.waitFor(task: f1.id, state: .running)
            _ = try client.openSession("limited", configuration: SessionConfiguration(maxConcurrent: 2))
            try client.waitFor(task: s2.id, state: .running)
            try await origin.waitUntilBytesServed("/s2", atLeast: 4096)
            #expect(origin.requests("/s1").count == 1)
            #expect(try client.task(s1.id).state == .running)
            #expect(try client.task(s1.id).attempts == 1)

            // Lowering a limit stops nothing: three transfers keep running above max-concurrent 1.
            _ = try client.setLimits(maxConcurrent: 1)
            let running = try client.tasks(state: .running).map(\.id).sorted()
            #expect(running == [s1.id, s2.id, f1.id].sorted())
            for name in ["s1", "s2", "f1"] { origin.releaseStall("/\(name)") }
            for t in [s1, s2, f1] { try client.waitFor(task: t.id, state: .completed) }
            for name in ["s1", "s2", "f1"] { #expect(origin.requests("/\(name)").count == 1) }
        }
    }

    @Test func setLimitsIsCheckedKeptAcrossRestartsAndShownByStatus() async throws {
        try await withDaemon(["--max-concurrent", "3", "--bandwidth-limit", "4M"]) { daemon, _ in
            var client = try daemon.client()
            let initial = try #require(try client.status().limits)
            #expect(initial == DaemonLimits(maxConcurrent: 3, maxConnectionsPerHost: 6, bandwidthLimit: 4 << 20))
            #expect(rpcCode { try client.setLimits(maxConcurrent: 0) } == .invalidParams)
            #expect(rpcCode { try client.setLimits(maxConnectionsPerHost: 1001) } == .invalidParams)
            #expect(rpcCode { try client.setLimits(bandwidthLimit: 10) } == .invalidParams)
            let bad = try ctl(["limits", "--bandwidth", "fast"], socket: daemon.socketPath)
            #expect(bad.status == 2 && bad.stderr.contains("k, M or G"))
            let set = try ctl(["--json", "limits", "--max-concurrent", "2", "--bandwidth", "512k"], socket: daemon.socketPath)
            #expect(set.status == 0, "\(set.stderr)")
            let shown = try WireCoding.decoder.decode(DaemonLimits.self, from: Data(set.stdout.utf8))
            #expect(shown == DaemonLimits(maxConcurrent: 2, maxConnectionsPerHost: 6, bandwidthLimit: 512 << 10))
            try daemon.terminate()
            try daemon.restart() // same flags: the journaled values win over them
            client = try daemon.client()
            let status = try client.status()
            #expect(status.maxConcurrent == 2)
            #expect(status.limits == shown)
            // The log's ready line names the limit in effect, not the flag's (it said 3 here).
            let readyLines = daemon.log().split(separator: "\n").filter { $0.contains("halftunesd \(HalfTunes.version) ready") }
            #expect(readyLines.count == 2 && readyLines.last!.contains("maxConcurrent=2 "), "\(readyLines)")
            let text = try ctl(["limits"], socket: daemon.socketPath)
            #expect(text.stdout.contains("512 KiB/s"), "\(text.stdout)")
        }
    }

    /// The limits a user set are part of what the journal holds: a journal that cannot say what they are stops the
    /// start, with the reason in the log, rather than running with the configured ones (and the next
    /// `daemon.setLimits` writing over what was set). Once the table reads again, the set values are in effect.
    @Test func unreadableSetLimitsStopTheStart() async throws {
        try await withDaemon(["--max-concurrent", "3"]) { daemon, _ in
            let set = try ctl(["limits", "--max-concurrent", "2"], socket: daemon.socketPath)
            #expect(set.status == 0, "\(set.stderr)")
            daemon.kill9()
            let path = daemon.stateDir + "/journal.sqlite"
            func edit(_ sql: String) throws {
                let journal = try DatabaseQueue(path: path)
                defer { try? journal.close() }
                try journal.write { db in try db.execute(sql: sql) }
            }
            try edit("ALTER TABLE settings RENAME TO settings_hidden_by_test")

            #expect(throws: (any Error).self) { try daemon.restart() }
            #expect(!daemon.isRunning)
            let log = daemon.log()
            #expect(log.contains("cannot replay the journal: the limits set with daemon.setLimits (table settings) cannot be read"), "\(log)")
            #expect(log.contains("no such table: settings"), "\(log)")

            try edit("ALTER TABLE settings_hidden_by_test RENAME TO settings")
            try daemon.restart()
            #expect(try daemon.client().status().maxConcurrent == 2, "the value set, not the flag's")
        }
    }
}
