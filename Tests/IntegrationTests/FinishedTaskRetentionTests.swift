import Foundation
import GRDB
import HalfTunesJournal
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Bounded growth (issue 27, point 5), through the binaries: finished tasks leave the journal once their events
/// are acknowledged and their session's `finishedTaskRetention` has passed, with their data-task bodies; a
/// task whose events wait is kept however old; `task.get` of a deleted task says why it may be gone; the
/// counts survive restarts.
@Suite("Finished tasks leave the journal", .serialized)
struct FinishedTaskRetentionTests {
    /// Retention 0: the tasks whose events are acknowledged go at once; those whose events wait stay.
    @Test func acknowledgedTasksGoAtOnceWithRetentionZero() async throws {
        try await withDaemon { daemon, origin in
            origin.put("/api.json", Array(#"{"ok":true}"#.utf8))
            var client = try daemon.client()
            let session = try client.openSession("gone", configuration: SessionConfiguration(finishedTaskRetention: 0))
            #expect(session.session.configuration.finishedTaskRetention == 0)
            var ids: [Int64] = []
            for _ in 0..<6 {
                let t = try client.createTask(TaskCreateParams(session: "gone", url: origin.url("/api.json"), start: true, kind: .data))
                ids.append(try client.waitFor(task: t.id, state: .completed).id)
            }
            #expect(try client.task(ids[0]).response?.body != nil)
            // Acknowledge the first three tasks' events only (each task's events are journaled in order).
            let events = try client.events(session: "gone", after: 0)
            var lastOfThird: Int64 = 0
            while let e = try events.nextEvent() {
                if e.task == ids[2], case .didComplete = e.payload { lastOfThird = e.seq ?? 0; break }
            }
            events.close()
            _ = try client.ack(session: "gone", through: lastOfThird)
            for id in ids.prefix(3) {
                do {
                    _ = try client.task(id)
                    Issue.record("task \(id) is still there")
                } catch HalfTunesClientError.rpc(let e) {
                    #expect(e.code == RPCErrorCode.unknownTask.rawValue && e.message.contains("finishedTaskRetention"), "\(e.message)")
                }
            }
            for id in ids.suffix(3) { #expect(try client.task(id).state == .completed, "its events wait: kept") }
            #expect(try client.session("gone").taskCounts == ["completed": 3])
            let journal = try Journal(path: daemon.stateDir + "/journal.sqlite")
            #expect(try ids.prefix(3).allSatisfy { try journal.loadTask($0) == nil }, "rows deleted, bodies with them")
            try journal.close()

            daemon.kill9()
            try daemon.restart()
            client = try daemon.client()
            #expect(try client.session("gone").taskCounts == ["completed": 3])
            #expect(try client.status().tasks["completed"] == 3)
            _ = try client.ack(session: "gone", through: try client.session("gone").lastEventSeq)
            #expect(try client.session("gone").taskCounts.isEmpty)
            #expect(try client.tasks(session: "gone").isEmpty)
        }
    }

    /// A retention of one second: acknowledged tasks stay listed until it has passed, then the daemon's sweep
    /// (at start, and every minute) deletes them; the default session keeps its tasks (24 h).
    @Test func aRetentionKeepsAcknowledgedTasksUntilItPasses() async throws {
        try await withDaemon { daemon, origin in
            origin.put("/a.json", Array("{}".utf8))
            var client = try daemon.client()
            _ = try client.openSession("brief", configuration: SessionConfiguration(finishedTaskRetention: 1))
            _ = try client.openSession("default")
            let brief = try client.createTask(TaskCreateParams(session: "brief", url: origin.url("/a.json"), start: true, kind: .data))
            let kept = try client.createTask(TaskCreateParams(session: "default", url: origin.url("/a.json"), start: true, kind: .data))
            _ = try client.waitFor(task: brief.id, state: .completed)
            _ = try client.waitFor(task: kept.id, state: .completed)
            let finishedAt = Date()
            for s in ["brief", "default"] { _ = try client.ack(session: s, through: try client.session(s).lastEventSeq) }
            #expect(try client.task(brief.id).state == .completed, "kept until its retention has passed")
            // The retention passes (a condition on the clock, not a guess at the daemon's timing) ...
            try eventually("one second since it finished") { Date().timeIntervalSince(finishedAt) > 1.5 ? true : nil }
            // ... and the sweep of the next start deletes it.
            daemon.kill9()
            try daemon.restart()
            client = try daemon.client()
            try eventually("the task deleted") { () -> Bool? in
                do { _ = try client.task(brief.id); return nil } catch HalfTunesClientError.rpc(let e) where e.code == RPCErrorCode.unknownTask.rawValue { return true }
            }
            #expect(try client.session("brief").taskCounts.isEmpty)
            #expect(try client.task(kept.id).state == .completed, "the default retention is a day")
            #expect(try client.session("default").taskCounts == ["completed": 1])
        }
    }

    /// A sweep the journal refuses (a trigger added to the live daemon's journal, as a full disk or an I/O error
    /// would) deletes nothing and loses nothing: the tasks stay listed and counted, the log says why, and the next
    /// sweep (here the session's next acknowledgement) deletes them once the journal takes the deletion.
    @Test func aSweepTheJournalRefusesIsLoggedAndTriedAgain() async throws {
        try await withDaemon { daemon, origin in
            origin.put("/api.json", Array(#"{"ok":true}"#.utf8))
            let client = try daemon.client()
            _ = try client.openSession("refused", configuration: SessionConfiguration(finishedTaskRetention: 0))
            var ids: [Int64] = []
            for _ in 0..<3 {
                let t = try client.createTask(TaskCreateParams(session: "refused", url: origin.url("/api.json"), start: true, kind: .data))
                ids.append(try client.waitFor(task: t.id, state: .completed).id)
            }
            let journal = try DatabaseQueue(path: daemon.stateDir + "/journal.sqlite")
            defer { try? journal.close() }
            try await journal.write { db in
                try db.execute(sql: """
                    CREATE TRIGGER refused_by_test BEFORE DELETE ON tasks
                    BEGIN SELECT RAISE(ABORT, 'refused by the test'); END
                    """)
            }
            _ = try client.ack(session: "refused", through: try client.session("refused").lastEventSeq)
            try eventually("the refused sweep logged") {
                daemon.log().contains("finished tasks could not be deleted; the next sweep tries again") ? true : nil
            }
            #expect(daemon.log().contains("refused by the test"), "the log names the journal's error")
            for id in ids { #expect(try client.task(id).state == .completed, "nothing deleted, nothing lost") }
            #expect(try client.tasks(session: "refused").map(\.id) == ids)
            #expect(try client.session("refused").taskCounts == ["completed": 3])

            try await journal.write { db in try db.execute(sql: "DROP TRIGGER refused_by_test") }
            _ = try client.ack(session: "refused", through: try client.session("refused").lastEventSeq)
            #expect(try client.tasks(session: "refused").isEmpty, "the next sweep deleted them")
            #expect(try client.session("refused").taskCounts.isEmpty)
            #expect(try await journal.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM tasks WHERE session LIKE '%refused'") } == 0)
        }
    }

    @Test func aRetentionOutOfRangeIsRefused() async throws {
        try await withDaemon { daemon, _ in
            let client = try daemon.client()
            for bad in [-1, 1e12] as [Double] {
                #expect(throws: (any Error).self) {
                    try client.openSession("bad", configuration: SessionConfiguration(finishedTaskRetention: bad))
                }
            }
            let shown = try ctl(["session", "open", "cli", "--finished-task-retention", "2h"], socket: daemon.socketPath)
            #expect(shown.status == 0 && shown.stdout.contains("finished tasks:     kept 2h 00m once acknowledged"), "\(shown.stdout)")
        }
    }
}
