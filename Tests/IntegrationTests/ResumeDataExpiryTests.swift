import Foundation
import GRDB
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Resume data expires after `resume-data-lifetime` (a week), with its partial file: when recovery ends, then
/// hourly. An expiry the journal refuses keeps the resume data and its partial and says why in the log (the state
/// tries again a minute later: DaemonStateHousekeepingTests). Through the binaries, with the journal edited while
/// the daemon is down: the token made eight days old, and a trigger refusing its deletion, as a full disk would.
@Suite("Resume data expiry")
struct ResumeDataExpiryTests {
    @Test func expiredResumeDataGoesAtStartAndARefusedExpiryKeepsItAndSaysWhy() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 16 * MiB, seed: 2811)
            origin.put("/old.bin", body)
            origin.setBehavior("/old.bin", .throttled(1 * MiB))
            let client = try daemon.client()
            let t = try client.startDownload(origin.url("/old.bin"), destination: "old.bin")
            try eventually("bytes durable") { try client.task(t.id).bytesDurable > 0 ? true : nil }
            let data = try #require(try client.cancel(t.id, produceResumeData: true).resumeData)
            daemon.kill9()

            let path = daemon.stateDir + "/journal.sqlite"
            func tokens() throws -> [String] {
                let journal = try DatabaseQueue(path: path)
                defer { try? journal.close() }
                return try journal.read { db in try String.fetchAll(db, sql: "SELECT partial_path FROM resume_tokens") }
            }
            func edit(_ sql: String) throws {
                let journal = try DatabaseQueue(path: path)
                defer { try? journal.close() }
                try journal.write { db in try db.execute(sql: sql) }
            }
            let partial = try #require(try tokens().first)
            #expect(FileManager.default.fileExists(atPath: partial))
            try edit("""
                UPDATE resume_tokens SET created_at = created_at - 8 * 86400;
                CREATE TRIGGER refused_by_test BEFORE DELETE ON resume_tokens
                BEGIN SELECT RAISE(ABORT, 'refused by the test'); END
                """)

            // Expired, but the journal refuses: kept, partial and all, and the log says why (the expiry runs
            // before the daemon accepts clients).
            try daemon.restart()
            let log = daemon.log()
            #expect(log.contains("expired resume data could not be deleted; it is kept, and tried again in a minute"), "\(log)")
            #expect(log.contains("refused by the test"))
            #expect(try tokens() == [partial])
            #expect(FileManager.default.fileExists(atPath: partial), "the partial stays with its resume data")
            daemon.kill9()

            // The journal takes the deletion again: the next start expires it, with its partial.
            try edit("DROP TRIGGER refused_by_test")
            try daemon.restart()
            #expect(try tokens().isEmpty)
            #expect(!FileManager.default.fileExists(atPath: partial), "an expired resume data's partial goes with it")
            #expect(daemon.log().components(separatedBy: "expired resume data could not be deleted").count == 2, "refused once only")
            do {
                _ = try daemon.client().createTask(TaskCreateParams(session: "test.session", resumeData: data, start: true))
                Issue.record("expired resume data was redeemed")
            } catch HalfTunesClientError.rpc(let e) {
                #expect(e.message.contains("resume"), "\(e.message)")
            }
        }
    }
}
