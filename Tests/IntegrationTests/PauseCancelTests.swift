import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Pause, resume and cancel")
struct PauseCancelTests {
    @Test func pauseThenResumeContinuesWith206AtThePausedOffset() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 6 * MiB, seed: 10)
            origin.put("/p.bin", body)
            origin.setBehavior("/p.bin", .throttled(2 * MiB))
            let client = try daemon.client()
            let t = try client.startDownload(origin.url("/p.bin"), maxConnections: 1)
            try eventually("1 MiB received") { try client.task(t.id).bytesReceived >= Int64(MiB) ? true : nil }
            let paused = try ctl(["pause", String(t.id)], socket: daemon.socketPath)
            #expect(paused.status == 0, "\(paused.stderr)")
            let info = try client.task(t.id)
            #expect(info.state == .suspended)
            let offset = info.bytesDurable
            #expect(offset >= Int64(MiB))
            #expect(info.bytesReceived == offset)
            origin.setBehavior("/p.bin", TestOrigin.Behavior())
            let resumed = try ctl(["resume", String(t.id)], socket: daemon.socketPath)
            #expect(resumed.status == 0, "\(resumed.stderr)")
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let requests = origin.requests("/p.bin")
            #expect(requests.count == 2)
            let second = try #require(requests.last)
            #expect(second.status == 206)
            #expect(second.range == "bytes=\(offset)-")
            #expect(second.ifRange != nil && second.ifRange == requests.first?.etag)
        }
    }

    @Test func illegalStateChangesAreRefusedClearly() async throws {
        try await withDaemon { daemon, origin in
            origin.put("/small", TestOrigin.randomBytes(count: 10, seed: 11))
            let client = try daemon.client()
            let t = try client.startDownload(origin.url("/small"))
            try client.waitFor(task: t.id, state: .completed)
            let r = try ctl(["resume", String(t.id)], socket: daemon.socketPath)
            #expect(r.status == 5)
            #expect(r.stderr.contains("completed"))
            #expect(throws: HalfTunesClientError.self) { try client.cancel(t.id) }
            let unknown = try ctl(["pause", "999999"], socket: daemon.socketPath)
            #expect(unknown.status == 3)
        }
    }

    @Test func cancelRemovesPartialDataAndEndsWithCanceled() async throws {
        try await withDaemon { daemon, origin in
            origin.put("/c.bin", TestOrigin.randomBytes(count: 8 * MiB, seed: 12))
            origin.setBehavior("/c.bin", .throttled(1 * MiB))
            let client = try daemon.client()
            let session = try client.openSession("cancel.s")
            let events = try EventRecorder(client: client, session: "cancel.s", after: session.session.lastEventSeq)
            let t = try client.createTask(TaskCreateParams(session: "cancel.s", url: origin.url("/c.bin"), start: true))
            try eventually("data on disk") { partialFiles(in: daemon.downloadsDir).isEmpty ? nil : true }
            try eventually("bytes received") { try client.task(t.id).bytesReceived > 0 ? true : nil }
            let r = try ctl(["cancel", String(t.id)], socket: daemon.socketPath)
            #expect(r.status == 0, "\(r.stderr)")
            let done = try events.wait(for: "didComplete") { $0.task == t.id && $0.isDidComplete }
            #expect(done.completionError??.code == TaskErrorCode.canceled)
            try eventually("partial removed") { partialFiles(in: daemon.downloadsDir).isEmpty ? true : nil }
            #expect(!FileManager.default.fileExists(atPath: daemon.downloadsDir + "/c.bin"))
            #expect(try client.task(t.id).state == .canceled)
        }
    }

    @Test func cancelWithResumeDataContinuesInANewTaskAtTheSameByte() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 6 * MiB, seed: 13)
            origin.put("/r.bin", body)
            origin.setBehavior("/r.bin", .throttled(2 * MiB))
            let client = try daemon.client()
            let t = try client.startDownload(origin.url("/r.bin"), session: "rd", maxConnections: 1)
            try eventually("1 MiB received") { try client.task(t.id).bytesReceived >= Int64(MiB) ? true : nil }
            let r = try ctl(["cancel", String(t.id), "--resume-data"], socket: daemon.socketPath)
            #expect(r.status == 0, "\(r.stderr)")
            let resumeData = r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(!resumeData.isEmpty && !resumeData.contains("/"))
            let canceled = try client.task(t.id)
            #expect(canceled.state == .canceled)
            origin.setBehavior("/r.bin", TestOrigin.Behavior())
            // A create the daemon refuses (its destination is another task's) does not use the resume data up.
            let held = daemon.downloadsDir + "/held.bin"
            let holder = try client.createTask(TaskCreateParams(session: "rd", url: origin.url("/other"), destination: held))
            let refused = try ctl(["download", "--session", "rd", "--resume-data", resumeData, "--destination", held],
                                  socket: daemon.socketPath)
            #expect(refused.status != 0 && refused.stderr.contains("held.bin"), "\(refused.stdout) \(refused.stderr)")
            _ = try client.cancel(holder.id)
            let again = try ctl(["download", "--session", "rd", "--resume-data", resumeData, "--wait"], socket: daemon.socketPath)
            #expect(again.status == 0, "\(again.stdout) \(again.stderr)")
            let tasks = try client.tasks(session: "rd")
            let second = try #require(tasks.first { $0.id != t.id && $0.id != holder.id })
            #expect(second.state == .completed)
            #expect(try sha256(ofFile: second.location!) == TestOrigin.sha256Hex(body))
            let last = try #require(origin.requests("/r.bin").last)
            #expect(last.status == 206)
            #expect(canceled.bytesDurable >= Int64(MiB))
            #expect(last.rangeStart == canceled.bytesDurable)
            #expect(origin.requests("/r.bin").count == 2)
            // Resume data is single-use.
            let reuse = try ctl(["download", "--session", "rd", "--resume-data", resumeData], socket: daemon.socketPath)
            #expect(reuse.status != 0)
            #expect(reuse.stderr.lowercased().contains("resume data"))
        }
    }
}
