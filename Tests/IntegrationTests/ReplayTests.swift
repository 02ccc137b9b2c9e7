// The state's inputs of a real run, kill -9 included, replayed into a fresh state: the same actions, in the same order.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Every integration test that ends normally stops its daemon gracefully and checks its replay report
/// (`running` in Harness.swift). This one makes sure the reports cover what matters: a split download, a failed
/// one, pause and resume, a cancel, a cancel keeping resume data, a graceful restart, and a kill -9 in the middle
/// of a transfer (the killed process's inputs, replayed in step as they came) followed by the recovery from the
/// journal.
@Suite("Replaying the state's inputs", .serialized)
struct ReplayTests {
    @Test func theInputsOfARunWithAKillNineReplayToTheSameActions() async throws {
        try await withDaemon { daemon, origin in
            let whole = TestOrigin.randomBytes(count: 8 * MiB, seed: 41)
            origin.put("/whole.bin", whole)
            let slow = TestOrigin.randomBytes(count: 6 * MiB, seed: 42)
            origin.put("/slow.bin", slow)
            origin.setBehavior("/slow.bin", .throttled(1 * MiB))
            var client = try daemon.client()

            // The first process: a split download, a failed one, pause and resume, a cancel; then a graceful stop.
            let split = try client.startDownload(origin.url("/whole.bin"), maxConnections: 4)
            let missing = try client.startDownload(origin.url("/missing.bin"))
            let transfer = try client.startDownload(origin.url("/slow.bin"), maxConnections: 1)
            #expect(try sha256(ofFile: client.waitFor(task: split.id, state: .completed).location!)
                == TestOrigin.sha256Hex(whole))
            _ = try client.waitFor(task: missing.id, state: .failed)
            try eventually("1 MiB durable") { try client.task(transfer.id).bytesDurable >= Int64(MiB) ? true : nil }
            _ = try client.suspend(transfer.id)
            _ = try client.resume(transfer.id)
            let canceled = try client.startDownload(origin.url("/slow.bin"), maxConnections: 1)
            _ = try client.cancel(canceled.id)
            // A cancel keeping resume data: its transfer stops, its token is written (`resumeDataStopped`,
            // `resumeTokenWritten`).
            let kept = try client.startDownload(origin.url("/slow.bin"), maxConnections: 1)
            try eventually("bytes durable") { try client.task(kept.id).bytesDurable > 0 ? true : nil }
            #expect(try client.cancel(kept.id, produceResumeData: true).resumeData != nil)
            try daemon.terminate()

            // The second process: recovery, the transfer goes on, kill -9 in the middle of it (its live report stays).
            try daemon.restart()
            client = try daemon.client()
            try eventually("3 MiB durable") { try client.task(transfer.id).bytesDurable >= Int64(3 * MiB) ? true : nil }
            daemon.kill9()

            // The third process recovers from what the killed one journaled, and finishes.
            origin.setBehavior("/slow.bin", TestOrigin.Behavior())
            try daemon.restart()
            client = try daemon.client()
            let done = try client.waitFor(task: transfer.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(slow))
            try daemon.terminate()

            let reports = try daemon.replayReports()
            #expect(reports.count == 2, "one report per graceful stop: \(reports)")
            let kinds = reports.map { ($0["kinds"] as? [String: Int]) ?? [:] }
            let first = try #require(kinds.first), last = try #require(kinds.last)
            for kind in ["created", "createsJournaled", "attemptProgress", "attemptEnded", "completion", "task",
                         "resumeDataStopped", "resumeTokenWritten", "shutdownBegan"] {
                #expect(first[kind, default: 0] > 0, "the first process's inputs include \(kind): \(first)")
            }
            for kind in ["sessionRestored", "taskRestored", "restoreFinished", "attemptEnded", "completion"] {
                #expect(last[kind, default: 0] > 0, "the recovery's inputs include \(kind): \(last)")
            }
            for report in reports {
                #expect(report["checked"] as? Int == report["inputs"] as? Int)
            }

            // The killed process left the replay of every input it was fed, made in step with it.
            let killed = try daemon.killedReplayReports()
            #expect(killed.count == 1, "one live report, the killed process's: \(killed)")
            let report = try #require(killed.first)
            let inputs = try #require(report["inputs"] as? Int)
            #expect(inputs > 0 && report["checked"] as? Int == inputs)
            #expect(!reports.contains { $0["pid"] as? Int == report["pid"] as? Int }, "not one of the graceful ones")
            let killedKinds = (report["kinds"] as? [String: Int]) ?? [:]
            for kind in ["sessionRestored", "taskRestored", "restoreFinished", "attemptProgress"] {
                #expect(killedKinds[kind, default: 0] > 0, "the killed process's inputs include \(kind): \(killedKinds)")
            }
        }
    }
}
