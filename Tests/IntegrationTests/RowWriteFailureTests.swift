// A task row the journal refuses, through the real daemon: written again once the journal takes it, events and all.
import Foundation
import GRDB
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("A task row the journal could not write")
struct RowWriteFailureTests {
    /// A download finishes while the journal refuses its finished row (a trigger added to the live daemon's
    /// journal, as a full disk would): the task is still described as completed, but no completion reaches a
    /// subscriber, since nothing of it is journaled. Once the journal takes writes again the daemon writes the row
    /// again with its events: the subscriber gets the completion, the journal has it completed, and after kill -9
    /// it is completed, not downloaded again.
    @Test func aFinishedRowThatFailedIsWrittenAgainWithItsEvents() async throws {
        try await withDaemon() { daemon, origin in
            let body = TestOrigin.randomBytes(count: 200_000, seed: 7301)
            origin.put("/late.bin", body)
            let client = try daemon.client()
            _ = try client.openSession("rewrite")
            let recorder = try EventRecorder(client: try daemon.client(), session: "rewrite", after: 0)
            let journal = try DatabaseQueue(path: daemon.stateDir + "/journal.sqlite")
            defer { try? journal.close() }
            try await journal.write { db in
                try db.execute(sql: """
                    CREATE TRIGGER refused_by_test BEFORE UPDATE ON tasks WHEN NEW.state = 'completed'
                    BEGIN SELECT RAISE(ABORT, 'refused by the test'); END
                    """)
            }
            func journaledState(_ id: Int64) async throws -> String? {
                try await journal.read { db in try String.fetchOne(db, sql: "SELECT state FROM tasks WHERE id = ?", arguments: [id]) }
            }
            let t = try client.startTask(origin.url("/late.bin"), session: "rewrite")
            try eventually("the finished row refused") { daemon.log().contains("journal write failed for task \(t.id)") ? true : nil }
            #expect(try client.task(t.id).state == .completed, "described from memory while the journal lags")
            #expect(try await journaledState(t.id) == "running")
            #expect(!recorder.all.contains { $0.task == t.id && $0.isDidComplete }, "nothing of the refused row was sent")
            // Tried again and refused again (the wait doubles), then the journal takes writes again.
            try eventually("written again and refused again", timeout: 30) {
                daemon.log().components(separatedBy: "journal write failed for task \(t.id)").count > 2 ? true : nil
            }
            try await journal.write { db in try db.execute(sql: "DROP TRIGGER refused_by_test") }
            try recorder.wait(for: "the completion, once written") { $0.task == t.id && $0.isDidComplete }
            #expect(try await journaledState(t.id) == "completed")
            let done = try client.task(t.id)
            #expect(try sha256(ofFile: try #require(done.location)) == TestOrigin.sha256Hex(body))

            daemon.kill9()
            try daemon.restart()
            let after = try daemon.client().task(t.id)
            #expect(after.state == .completed && after.location == done.location)
            #expect(origin.requests("/late.bin").count == 1, "completed once, not downloaded again")
        }
    }

    /// A checkpoint the journal refuses (a trigger, as a full disk would) is not only logged: the state has the
    /// task's row written again, which carries the durable ranges. The download stalls after its first bytes, so
    /// nothing else would write the row: once the journal takes writes again, it has the durable bytes the daemon
    /// shows.
    @Test func aRefusedCheckpointIsWrittenAgainWithTheRow() async throws {
        try await withDaemon() { daemon, origin in
            let body = TestOrigin.randomBytes(count: 600_000, seed: 7302)
            origin.put("/stalled.bin", body)
            origin.setBehavior("/stalled.bin", .stalled(after: 200_000))
            let client = try daemon.client()
            let journal = try DatabaseQueue(path: daemon.stateDir + "/journal.sqlite")
            defer { try? journal.close() }
            try await journal.write { db in
                try db.execute(sql: """
                    CREATE TRIGGER refused_by_test BEFORE UPDATE OF bytes_durable ON tasks
                        WHEN NEW.bytes_durable > OLD.bytes_durable
                    BEGIN SELECT RAISE(ABORT, 'refused by the test'); END
                    """)
            }
            func journaledBytes(_ id: Int64) async throws -> Int64? {
                try await journal.read { db in try Int64.fetchOne(db, sql: "SELECT bytes_durable FROM tasks WHERE id = ?", arguments: [id]) }
            }
            let t = try client.startDownload(origin.url("/stalled.bin"))
            try eventually("the checkpoint refused") { daemon.log().contains("journal checkpoint failed for task \(t.id)") ? true : nil }
            let shown = try client.task(t.id)
            #expect(shown.state == .running && shown.bytesDurable == 200_000, "durable on disk, shown from memory")
            #expect(try await journaledBytes(t.id) == 0, "the journal lags")
            try await journal.write { db in try db.execute(sql: "DROP TRIGGER refused_by_test") }
            // Nothing else writes the row while the origin stalls: only the state's rewrite brings it up to date.
            try eventually("the row written again", timeout: 30) {
                try journal.read { db in try Int64.fetchOne(db, sql: "SELECT bytes_durable FROM tasks WHERE id = ?", arguments: [t.id]) } == 200_000 ? true : nil
            }
            #expect(try client.task(t.id).state == .running)
            origin.releaseStall("/stalled.bin")
            let done = try client.waitFor(task: t.id, state: .completed, timeout: 30)
            #expect(try sha256(ofFile: try #require(done.location)) == TestOrigin.sha256Hex(body))
        }
    }
}
