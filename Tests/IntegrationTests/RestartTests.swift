import Foundation
import HalfTunesJournal
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Crashes, restarts and changed files", .serialized)
struct RestartTests {
    @Test func killNineResumesFromTheCheckpointWithIfRange() async throws {
        try await withDaemon { daemon, origin in
            let rate = 1 * MiB
            let body = TestOrigin.randomBytes(count: 6 * MiB, seed: 20)
            origin.put("/crash.bin", body)
            origin.setBehavior("/crash.bin", .throttled(rate))
            var client = try daemon.client()
            let t = try client.startDownload(origin.url("/crash.bin"), maxConnections: 1)
            try eventually("2 MiB durable") { try client.task(t.id).bytesDurable >= Int64(2 * MiB) ? true : nil }
            daemon.kill9()
            let servedBeforeCrash = origin.bytesServed("/crash.bin")
            origin.setBehavior("/crash.bin", TestOrigin.Behavior())
            try daemon.restart()
            client = try daemon.client()
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            #expect(done.attempts == 2) // the attempt before the crash was journaled when it started
            let requests = origin.requests("/crash.bin")
            #expect(requests.count == 2)
            let resumed = try #require(requests.last)
            #expect(resumed.status == 206)
            #expect(resumed.ifRange == requests.first?.etag)
            let offset = try #require(resumed.rangeStart)
            #expect(offset >= Int64(2 * MiB))
            // Bytes fetched twice: what the origin sent before the crash beyond the resume offset.
            let refetched = servedBeforeCrash - offset
            #expect(refetched >= 0)
            #expect(refetched <= Int64(Double(rate) * 1.5), "re-fetched \(refetched) bytes, more than ~1 s of transfer")
            #expect(partialFiles(in: daemon.downloadsDir).isEmpty)
        }
    }

    /// After kill -9 the journal holds durable ranges with a gap, as segments leave them (written here into the
    /// stopped daemon's journal; the bytes in the gap are garbage, as unjournaled bytes may be). The restarted
    /// daemon reads the ranges and keeps them: its first request resumes at the end of the first range and
    /// stops where kept data begins, and what is missing after the kept ranges is asked for as exactly its
    /// range; both with If-Range. The file is whole.
    @Test func durableRangesWithAGapResumeAfterKillNine() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 6 * MiB, seed: 24)
            origin.put("/ranges.bin", body)
            origin.setBehavior("/ranges.bin", .throttled(1 * MiB))
            var client = try daemon.client()
            let t = try client.startDownload(origin.url("/ranges.bin"), maxConnections: 1)
            try eventually("2 MiB durable") { try client.task(t.id).bytesDurable >= Int64(2 * MiB) ? true : nil }
            daemon.kill9()
            origin.setBehavior("/ranges.bin", TestOrigin.Behavior())

            let journal = try Journal(path: daemon.stateDir + "/journal.sqlite")
            var row = try #require(try journal.loadTask(t.id))
            let durable = row.bytesDurable
            let ranges = ByteRanges([0..<Int64(MiB), Int64(MiB + MiB / 2)..<durable])
            row.durableRanges = ranges
            try journal.updateTask(row, events: [])
            try journal.close()
            let handle = try #require(FileHandle(forWritingAtPath: row.partialPath))
            try handle.seek(toOffset: UInt64(MiB))
            try handle.write(contentsOf: Data(repeating: 0xEE, count: MiB / 2))
            try handle.close()

            try daemon.restart()
            client = try daemon.client()
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let requests = origin.requests("/ranges.bin")
            let resumed = requests.dropFirst()
            #expect(resumed.map(\.range) == ["bytes=\(MiB)-", "bytes=\(durable)-\(body.count - 1)"])
            #expect(resumed.allSatisfy { $0.status == 206 && $0.ifRange == requests.first?.etag })
        }
    }

    @Test func sigtermCheckpointsExitsCleanlyAndContinuesOnNextStart() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 6 * MiB, seed: 21)
            origin.put("/term.bin", body)
            origin.setBehavior("/term.bin", .throttled(2 * MiB))
            var client = try daemon.client()
            let t = try client.startDownload(origin.url("/term.bin"))
            let suspended = try client.createTask(TaskCreateParams(session: "test.session", url: origin.url("/term.bin"),
                                                                   destination: "other.bin"))
            try eventually("1 MiB received") { try client.task(t.id).bytesReceived >= Int64(MiB) ? true : nil }
            let (status, _) = try daemon.terminate()
            #expect(status == 0)
            // The running transfer stopped with its checkpoint: the stop did not wait out its grace period.
            let stop = daemon.log().split(separator: "\n").last { $0.contains("transfers checkpointed") }
            #expect(stop?.hasSuffix("stopped=1 unfinished=0") == true, "\(stop ?? "no stop logged")")
            #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
            let servedBefore = origin.bytesServed("/term.bin")
            origin.setBehavior("/term.bin", TestOrigin.Behavior())
            try daemon.restart()
            client = try daemon.client()
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let resumed = try #require(origin.requests("/term.bin").last)
            #expect(resumed.status == 206)
            // A clean stop checkpoints everything received: nothing is fetched twice.
            #expect(servedBefore - (resumed.rangeStart ?? 0) < Int64(256 * 1024))
            #expect(try client.task(suspended.id).state == .suspended)
            // Ids are never reused across restarts.
            let next = try client.createTask(TaskCreateParams(session: "test.session", url: origin.url("/term.bin"),
                                                              destination: "third.bin"))
            #expect(next.id > suspended.id)
        }
    }

    @Test func aFileChangedOnTheServerIsNeverSpliced() async throws {
        try await withDaemon { daemon, origin in
            let v1 = TestOrigin.randomBytes(count: 4 * MiB, seed: 22)
            let v2 = TestOrigin.randomBytes(count: 3 * MiB + 77, seed: 23)
            origin.put("/changing.bin", v1)
            origin.setBehavior("/changing.bin", .throttled(2 * MiB))
            let client = try daemon.client()
            let session = try client.openSession("chg")
            let events = try EventRecorder(client: client, session: "chg", after: session.session.lastEventSeq)
            let t = try client.createTask(TaskCreateParams(session: "chg", url: origin.url("/changing.bin"), start: true))
            try eventually("1 MiB received") { try client.task(t.id).bytesReceived >= Int64(MiB) ? true : nil }
            _ = try client.suspend(t.id)
            origin.change("/changing.bin", to: v2)
            origin.setBehavior("/changing.bin", TestOrigin.Behavior())
            _ = try client.resume(t.id)
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(v2))
            let second = try #require(origin.requests("/changing.bin").last)
            #expect(second.range != nil && second.ifRange != nil)
            #expect(second.status == 200)
            let restart = try events.wait(for: "restart event") {
                if case .didResumeAtOffset(0, _, let discarded?, "resourceChanged") = $0.payload { return discarded > 0 }
                return false
            }
            #expect(restart.task == t.id)
        }
    }

    @Test func changedFileAfterKillNineIsNeverSpliced() async throws {
        try await withDaemon { daemon, origin in
            let v1 = TestOrigin.randomBytes(count: 4 * MiB, seed: 24)
            let v2 = TestOrigin.randomBytes(count: 4 * MiB, seed: 25)
            origin.put("/c9.bin", v1)
            origin.setBehavior("/c9.bin", .throttled(2 * MiB))
            var client = try daemon.client()
            let t = try client.startDownload(origin.url("/c9.bin"))
            try eventually("1 MiB durable") { try client.task(t.id).bytesDurable >= Int64(MiB) ? true : nil }
            daemon.kill9()
            origin.change("/c9.bin", to: v2)
            origin.setBehavior("/c9.bin", TestOrigin.Behavior())
            try daemon.restart()
            client = try daemon.client()
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(v2))
        }
    }
}
