import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// A user keeps a bounded number of partial files as resume data (issue 27, point 5): past
/// `max-resume-data-per-uid`, `task.cancel` with resume data is refused with `limitExceeded` and cancels nothing;
/// redeeming resume data frees its place; what is kept is still counted after kill -9 and a restart.
@Suite("Resume data per user")
struct ResumeDataCapTests {
    @Test func resumeDataBeyondTheCapIsRefusedAndNothingIsLost() async throws {
        try await withDaemon(["--max-resume-data-per-uid", "1"]) { daemon, origin in
            let body = TestOrigin.randomBytes(count: 16 * MiB, seed: 2730)
            origin.put("/r.bin", body)
            origin.setBehavior("/r.bin", .throttled(1 * MiB))
            let client = try daemon.client()
            let first = try client.startDownload(origin.url("/r.bin"), destination: "first.bin")
            let second = try client.startDownload(origin.url("/r.bin"), destination: "second.bin")
            try eventually("bytes durable") {
                try client.task(first.id).bytesDurable > 0 && client.task(second.id).bytesDurable > 0 ? true : nil
            }
            let data = try #require(try client.cancel(first.id, produceResumeData: true).resumeData)
            do {
                _ = try client.cancel(second.id, produceResumeData: true)
                Issue.record("a second resume data was kept")
            } catch HalfTunesClientError.rpc(let e) {
                #expect(e.code == RPCErrorCode.limitExceeded.rawValue && e.message.contains("max-resume-data-per-uid 1"), "\(e.message)")
            }
            #expect(try client.task(second.id).state == .running, "the refused cancel canceled nothing")
            // Redeeming the first frees its place.
            origin.setBehavior("/r.bin", TestOrigin.Behavior())
            let resumed = try client.createTask(TaskCreateParams(session: "test.session", resumeData: data, start: true))
            #expect(try client.waitFor(task: resumed.id, state: .completed).bytesReceived == Int64(body.count))
            origin.setBehavior("/r.bin", .throttled(1 * MiB))
            #expect(try client.cancel(second.id, produceResumeData: true).resumeData != nil)
            // The count survives kill -9: read from the journal at start, so a third is refused after a restart.
            let third = try client.startDownload(origin.url("/r.bin"), destination: "third.bin")
            try eventually("bytes durable") { try client.task(third.id).bytesDurable > 0 ? true : nil }
            daemon.kill9()
            try daemon.restart()
            let again = try daemon.client()
            try eventually("running again") {
                try again.task(third.id).state == .running && again.task(third.id).bytesDurable > 0 ? true : nil
            }
            do {
                _ = try again.cancel(third.id, produceResumeData: true)
                Issue.record("resume data beyond the cap was kept after a restart")
            } catch HalfTunesClientError.rpc(let e) {
                #expect(e.code == RPCErrorCode.limitExceeded.rawValue, "\(e.message)")
            }
        }
    }
}
