import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Issue 54, point 3: a crash never repeats. A task whose transfer makes the daemon trap (a real Swift overflow
/// trap, through the `HALFTUNES_CRASH_AT=trap:<url text>` hook) is in the crash record each time; after 3 crashes in
/// a row the restart fails it as `quarantined` instead of starting it again, and the other tasks go on.
@Suite("A crash never repeats", .serialized)
struct CrashQuarantineTests {
    @Test func aTaskThatCrashedTheDaemonThreeTimesIsQuarantinedAndTheOthersComplete() async throws {
        let origin = try await TestOrigin.start()
        let daemon = try DaemonProcess(extraArgs: ["--max-concurrent", "1"], start: false)
        daemon.environment = ["HALFTUNES_CRASH_AT": "trap:/poison"]
        try await running(daemon, origin) {
            try daemon.start()
            let running = TestOrigin.randomBytes(count: 4 * MiB, seed: 5410)
            let queued = TestOrigin.randomBytes(count: 300_000, seed: 5411)
            origin.put("/running.bin", running)
            origin.put("/queued.bin", queued)
            origin.put("/poison.bin", TestOrigin.randomBytes(count: 1000, seed: 5412))
            origin.setBehavior("/running.bin", .throttled(1 * MiB))
            var client = try daemon.client()
            // One transfer at a time: A runs; P (high priority) and B wait behind it.
            let a = try client.startDownload(origin.url("/running.bin"))
            try eventually("A running") { try client.task(a.id).bytesDurable > 0 ? true : nil }
            let p = try client.createTask(TaskCreateParams(session: "test.session", url: origin.url("/poison.bin"),
                                                           start: true, priority: .high))
            let b = try client.createTask(TaskCreateParams(session: "test.session", url: origin.url("/queued.bin"),
                                                           start: true))
            #expect(try client.task(p.id).state == .queued && client.task(b.id).state == .queued)
            // A steps aside: P takes the slot, and its transfer traps.
            _ = try? client.suspend(a.id)
            try eventually("the first crash") { daemon.isRunning ? nil : true }
            #expect(daemon.process?.terminationReason == .uncaughtSignal)
            var crashes = 1
            // What systemd's Restart=on-failure does: start it again, as long as it keeps dying.
            var quarantined = false
            for _ in 0..<5 where !quarantined {
                do {
                    try daemon.restart()
                    client = try daemon.client()
                    let state = try eventually("P failed, or another crash") { () -> Bool? in
                        if !daemon.isRunning { return false }
                        return (try? client.task(p.id))?.state == .failed ? true : nil
                    }
                    if state { quarantined = true } else { crashes += 1 }
                } catch {
                    try #require(!daemon.isRunning, "\(error)")
                    #expect(daemon.process?.terminationReason == .uncaughtSignal)
                    crashes += 1
                }
            }
            #expect(quarantined && crashes == 3, "crashes: \(crashes)")
            let failed = try client.task(p.id)
            #expect(failed.error?.code == TaskErrorCode.quarantined, "\(String(describing: failed.error))")
            #expect(failed.error?.message.contains("crashed 3 times") == true)
            // Each crash named P; never B, which waited behind P. The first may name A too, whose suspended transfer
            // may still have been stopping when P started; the restarts' name P alone.
            let record = try String(contentsOfFile: daemon.stateDir + "/crashes", encoding: .utf8)
            let named = record.split(separator: "\n").map { Set($0.split(separator: " ").dropFirst(2).compactMap { Int64($0) }) }
            #expect(named.count == 3 && named.allSatisfy { $0.contains(p.id) && !$0.contains(b.id) }, "\(record)")
            #expect(named.dropFirst() == [[p.id], [p.id]], "\(record)")
            // The innocent tasks: B runs as it would have, A resumes from its kept bytes.
            let doneB = try client.waitFor(task: b.id, state: .completed)
            #expect(try sha256(ofFile: doneB.location!) == TestOrigin.sha256Hex(queued))
            origin.setBehavior("/running.bin", TestOrigin.Behavior())
            // A's suspension reached the journal unless the trap came first (P took A's slot at once): then A was
            // restored queued and has run on by itself.
            if try client.task(a.id).state == .suspended { _ = try client.resume(a.id) }
            let doneA = try client.waitFor(task: a.id, state: .completed)
            #expect(try sha256(ofFile: doneA.location!) == TestOrigin.sha256Hex(running))
            // A clean stop and a restart without a new crash change nothing: P stays failed, nothing else is held.
            daemon.environment = [:]
            try daemon.terminate()
            try daemon.restart()
            client = try daemon.client()
            #expect(try client.task(p.id).state == .failed)
            #expect(daemon.isRunning)
        }
    }

    /// A kill -9 (like an OOM kill or a power cut) writes no crash: however often it happens to a running task, the
    /// task is not quarantined.
    @Test func killsThatAreNotTheDaemonsOwnCrashesNeverCount() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 4 * MiB, seed: 5413)
            origin.put("/killed.bin", body)
            origin.setBehavior("/killed.bin", .throttled(1 * MiB))
            var client = try daemon.client()
            let t = try client.startDownload(origin.url("/killed.bin"))
            for _ in 0..<4 {
                try eventually("running") { try client.task(t.id).state == .running ? true : nil }
                daemon.kill9()
                try daemon.restart()
                client = try daemon.client()
            }
            let record = try String(contentsOfFile: daemon.stateDir + "/crashes", encoding: .utf8)
            #expect(record.isEmpty)
            origin.setBehavior("/killed.bin", TestOrigin.Behavior())
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
        }
    }
}
