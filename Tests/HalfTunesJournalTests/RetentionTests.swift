// Bounded growth (issue 27, point 5): finished counts kept by triggers, a restart that reads only the rows it
// loads, and finished tasks deleted once acknowledged and past their retention.
import Foundation
import GRDB
import GRDBSQLite
import HalfTunesProtocol
import Testing
@testable import HalfTunesJournal

@Suite struct RetentionTests {
    /// Inserts, state changes, a publish and deletions keep `finished_counts` equal to a count of the rows.
    @Test func theTriggersKeepTheFinishedCounts() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session("a"))
        try journal.upsertSession(Sample.session("b"))
        var ids: [Int64] = []
        for (i, state) in [TaskState.suspended, .completed, .failed, .running, .canceled, .completed].enumerated() {
            let (t, _) = try journal.insertTask(Sample.task(session: i % 2 == 0 ? "a" : "b", name: "f\(i)", state: state), events: [])
            ids.append(t.id!)
        }
        func expectCountsMatchRows(_ comment: Comment) throws {
            let counted = try journal.read { db in try Journal.finishedCounts(db) }
            let actual = try journal.read { db -> [String: [TaskState: Int]] in
                var result: [String: [TaskState: Int]] = [:]
                for row in try Row.fetchAll(db, sql: """
                    SELECT session, state, COUNT(*) AS n FROM tasks
                    WHERE state IN ('completed', 'failed', 'canceled') AND phase != 'publishing' GROUP BY session, state
                    """) {
                    result[row["session"], default: [:]][TaskState(rawValue: row["state"])!] = row["n"]
                }
                return result
            }
            #expect(counted == actual, comment)
        }
        try expectCountsMatchRows("after inserts")
        #expect(try journal.read { try Journal.finishedCounts($0) } == ["b": [.completed: 2], "a": [.completed: 0, .failed: 1, .canceled: 1]]
                .mapValues { $0.filter { $0.value > 0 } })
        // A running task completes; a completed one is saved again unchanged; a failed one is retried.
        var running = try #require(try journal.loadTask(ids[3]))
        running.state = .completed
        _ = try journal.updateTask(running, events: [])
        _ = try journal.updateTask(running, events: [])
        var failed = try #require(try journal.loadTask(ids[2]))
        failed.state = .queued
        _ = try journal.updateTask(failed, events: [])
        var publishing = try #require(try journal.loadTask(ids[0]))
        publishing.state = .completed
        publishing.phase = .publishing
        _ = try journal.updateTask(publishing, events: [])
        try expectCountsMatchRows("after updates")
        _ = try journal.deleteFinishedTasks(session: "b", finishedBefore: .infinity, limit: 10)
        try expectCountsMatchRows("after deleting")
    }

    /// A restart loads the unfinished tasks and those being published, and reads the finished ones' counts
    /// from their table; it reads them through the partial index (no finished row is visited).
    @Test func aRestartReadsOnlyTheRowsItLoads() async throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session("a"))
        for i in 0..<50 { _ = try journal.insertTask(Sample.task(session: "a", name: "done\(i)", state: .completed), events: []) }
        _ = try journal.insertTask(Sample.task(session: "a", name: "live", state: .queued), events: [])
        let loaded = try journal.loadUnfinishedTasks()
        #expect(loaded.map(\.destination) == ["/home/u/Downloads/live"])
        let plan = try journal.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN SELECT * FROM tasks WHERE \(Journal.loadedRows) ORDER BY id")
                .map { $0["detail"] as String }.joined(separator: "; ")
        }
        #expect(plan.contains("tasks_loaded"), "\(plan)")
        let scan = journal.scanTasks()
        while try await scan.next() != nil {}
        #expect(scan.finishedCounts == ["a": [.completed: 50]])
    }

    /// Only tasks finished before the cutoff whose events are all acknowledged go, oldest first, at most
    /// `limit`; a session's other tasks and other sessions stay.
    @Test func onlyAcknowledgedTasksPastTheirRetentionAreDeleted() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session("a"))
        try journal.upsertSession(Sample.session("b"))
        var old = Sample.task(session: "a", name: "old", state: .completed)
        old.updatedAt = 100
        let (oldTask, _) = try journal.insertTask(old, events: [])
        var unacked = Sample.task(session: "a", name: "unacked", state: .failed)
        unacked.updatedAt = 100
        let (unackedTask, _) = try journal.insertTask(unacked, events: [])
        _ = try journal.appendEvents([Sample.stateChanged(session: "a", task: unackedTask.id, to: .failed, from: .running)])
        var recent = Sample.task(session: "a", name: "recent", state: .completed)
        recent.updatedAt = 500
        _ = try journal.insertTask(recent, events: [])
        var other = Sample.task(session: "b", name: "other", state: .completed)
        other.updatedAt = 100
        _ = try journal.insertTask(other, events: [])
        _ = try journal.insertTask(Sample.task(session: "a", name: "live", state: .queued), events: [])

        #expect(try journal.deleteFinishedTasks(session: "a", finishedBefore: 200, limit: 10) == [.completed: 1])
        #expect(try journal.loadTask(oldTask.id!) == nil)
        #expect(try journal.loadTask(unackedTask.id!) != nil, "its event is not acknowledged")
        #expect(try journal.deleteFinishedTasks(session: "a", finishedBefore: 200, limit: 10).isEmpty)
        _ = try journal.ack(session: "a", through: try journal.lastEventSeq(session: "a"))
        #expect(try journal.deleteFinishedTasks(session: "a", finishedBefore: 1000, limit: 1) == [.failed: 1])
        #expect(try journal.deleteFinishedTasks(session: "a", finishedBefore: 1000, limit: 10) == [.completed: 1])
        #expect(try journal.read { try Journal.finishedCounts($0) } == ["b": [.completed: 1]])
        #expect(try journal.loadUnfinishedTasks().count == 1)
    }

    /// A client away with thousands of finished tasks it has not acknowledged: each sweep reads only the tasks
    /// finished before the session's first event left to acknowledge, not those thousands again (counted in
    /// SQLite's virtual machine steps of the sweep's statement), and still deletes the old acknowledged ones.
    @Test func aSweepDoesNotReadTasksWhoseEventsAreNotAcknowledged() throws {
        let journal = try Journal.openInMemory()
        try journal.upsertSession(Sample.session("a"))
        for i in 0..<5 { // finished and acknowledged long ago
            var t = Sample.task(session: "a", name: "old\(i)", state: .completed)
            t.updatedAt = 100
            _ = try journal.insertTask(t, events: [])
        }
        for i in 0..<3_000 { // finished while the client was away: one event each, not acknowledged
            var t = Sample.task(session: "a", name: "away\(i)", state: .completed)
            t.updatedAt = Timestamp.now() // as the daemon stamps them: its events are written after
            let (task, _) = try journal.insertTask(t, events: [])
            _ = try journal.appendEvents([Sample.stateChanged(session: "a", task: task.id, to: .completed, from: .running)])
        }
        func sweep() throws -> (deleted: [TaskState: Int], steps: Int32) {
            let deleted = try journal.deleteFinishedTasks(session: "a", finishedBefore: .infinity, limit: 10)
            let steps = try journal.write { db in
                sqlite3_stmt_status(try db.cachedStatement(sql: Journal.sweepSQL).sqliteStatement, SQLITE_STMTSTATUS_VM_STEP, 1)
            }
            return (deleted, steps)
        }
        let first = try sweep()
        #expect(first.deleted == [.completed: 5])
        #expect(first.steps < 1_000, "\(first.steps) steps")
        let second = try sweep()
        #expect(second.deleted.isEmpty)
        #expect(second.steps < 1_000, "\(second.steps) steps: the tasks not acknowledged were read again")
        // Acknowledged: they go, 10 a sweep.
        _ = try journal.ack(session: "a", through: try journal.lastEventSeq(session: "a"))
        #expect(try sweep().deleted == [.completed: 10])
    }
}
