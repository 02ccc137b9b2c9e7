import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Servers that lie about versions (issue 27, point 1), through the binaries: a resumed or further response
/// continues kept bytes only when its strong ETag, Last-Modified and complete length are those the kept bytes
/// came from. Otherwise the kept bytes go, the download starts again from byte 0 (`didResumeAtOffset` 0,
/// `resourceChanged`), and the published file is exactly one version.
@Suite("Servers that lie about versions", .serialized)
struct LyingServerTests {
    enum Interruption: String, CaseIterable, CustomTestStringConvertible {
        case killNine, pause, resumeData
        var testDescription: String { rawValue }
    }

    /// A server that honours Range but ignores If-Range (BusyBox httpd): the file changes to another of the
    /// same length while the download is interrupted, and the resumed request is answered 206 from the new
    /// version. One connection and the default (split) settings alike.
    @Test(arguments: Interruption.allCases, [1, 0])
    func aServerIgnoringIfRangeNeverGetsASplice(interruption: Interruption, connections: Int) async throws {
        try await withDaemon { daemon, origin in
            let v1 = TestOrigin.randomBytes(count: 16 * MiB, seed: 2701)
            let v2 = TestOrigin.randomBytes(count: 16 * MiB, seed: 2702)
            origin.put("/lie.bin", v1)
            var slow = TestOrigin.Behavior.throttled(2 * MiB)
            slow.ignoreIfRange = true
            origin.setBehavior("/lie.bin", slow)
            var client = try daemon.client()
            var task = try client.startDownload(origin.url("/lie.bin"), maxConnections: connections == 0 ? nil : connections)
            try eventually("1 MiB durable") { try client.task(task.id).bytesDurable >= Int64(MiB) ? true : nil }
            let before = origin.requests("/lie.bin").count
            switch interruption {
            case .killNine:
                daemon.kill9()
                origin.change("/lie.bin", to: v2)
                origin.setBehavior("/lie.bin", Self.ignoringIfRange)
                try daemon.restart()
                client = try daemon.client()
            case .pause:
                _ = try client.suspend(task.id)
                try eventually("no response running") { origin.concurrentResponses("/lie.bin") == 0 ? true : nil }
                origin.change("/lie.bin", to: v2)
                origin.setBehavior("/lie.bin", Self.ignoringIfRange)
                _ = try client.resume(task.id)
            case .resumeData:
                let data = try #require(try client.cancel(task.id, produceResumeData: true).resumeData)
                try eventually("no response running") { origin.concurrentResponses("/lie.bin") == 0 ? true : nil }
                origin.change("/lie.bin", to: v2)
                origin.setBehavior("/lie.bin", Self.ignoringIfRange)
                task = try client.createTask(TaskCreateParams(session: "test.session", resumeData: data, start: true))
            }
            let done = try client.waitFor(task: task.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(v2), "spliced")
            // The server did answer the resume with a 206 of the new version (the lie happened) ...
            let resumed = try #require(origin.requests("/lie.bin").dropFirst(before).first)
            #expect(resumed.ifRange != nil && resumed.status == 206, "\(resumed.range ?? "-") → \(resumed.status)")
            // ... and the task said why it started over.
            try Self.expectRestart(client, task: task.id)
        }
    }

    /// While split, the file changes under a server that ignores If-Range: the further requests get 206s of the
    /// new version, which are not written; the download starts again from 0 within the attempt.
    @Test func aChangeWhileSplitUnderAServerIgnoringIfRange() async throws {
        try await withDaemon { daemon, origin in
            let v1 = TestOrigin.randomBytes(count: 24 * MiB, seed: 2703)
            let v2 = TestOrigin.randomBytes(count: 24 * MiB, seed: 2704)
            origin.put("/split-lie.bin", v1)
            var slow = TestOrigin.Behavior.throttled(2 * MiB)
            slow.ignoreIfRange = true
            origin.setBehavior("/split-lie.bin", slow)
            let client = try daemon.client()
            let task = try client.startDownload(origin.url("/split-lie.bin"))
            try eventually("split") { (try client.task(task.id).connections ?? 0) > 1 ? true : nil }
            let before = origin.requests("/split-lie.bin").count
            origin.change("/split-lie.bin", to: v2)
            var fast = Self.ignoringIfRange
            fast.bytesPerSecond = 8 * MiB
            origin.setBehavior("/split-lie.bin", fast)
            // Only a request made after the change can see the new version: wait for one.
            try await origin.waitForRequests("/split-lie.bin", count: before + 1)
            let done = try client.waitFor(task: task.id, state: .completed)
            let sha = try sha256(ofFile: done.location!)
            #expect(sha == TestOrigin.sha256Hex(v2), "spliced (v1 whole: \(sha == TestOrigin.sha256Hex(v1)))")
            try Self.expectRestart(client, task: task.id)
        }
    }

    /// Each lie on the resumed response alone is another version: a strong ETag come back weak or missing, a
    /// complete length in Content-Range that is not the file's. The file is whole. (A Last-Modified left out
    /// beside the same strong ETag is no lie: a 206 need not repeat it, and the resume appends.)
    @Test(arguments: ["weakETag", "omitETag", "contentRangeTotal", "omitLastModified"])
    func aResumeThatLiesStartsOver(lie: String) async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 8 * MiB, seed: 2705)
            origin.put("/l.bin", body)
            origin.setBehavior("/l.bin", .throttled(2 * MiB))
            var client = try daemon.client()
            let task = try client.startDownload(origin.url("/l.bin"), maxConnections: 1)
            try eventually("1 MiB durable") { try client.task(task.id).bytesDurable >= Int64(MiB) ? true : nil }
            daemon.kill9()
            var b = Self.ignoringIfRange
            b.faultsFromRequest = origin.requests("/l.bin").count  // only the resume lies
            switch lie {
            case "weakETag": b.weakETag = true
            case "omitETag": b.omitETag = true
            case "omitLastModified": b.omitLastModified = true
            default: b.contentRangeTotal = Int64(body.count) * 2
            }
            origin.setBehavior("/l.bin", b)
            try daemon.restart()
            client = try daemon.client()
            let done = try client.waitFor(task: task.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let requests = origin.requests("/l.bin")
            let resumed = try #require(requests.dropFirst(b.faultsFromRequest).first)
            #expect(resumed.status == 206 && resumed.range != nil)
            if lie == "omitLastModified" {
                #expect(requests.count == b.faultsFromRequest + 1, "appended, no restart: \(requests.map(\.status))")
                return
            }
            // Then the whole file again from byte 0, without Range.
            #expect(requests.last?.range == nil && requests.last?.status == 200)
            try Self.expectRestart(client, task: task.id)
        }
    }

    /// A weak ETag and no Last-Modified: nothing can vouch for kept bytes, so a resume never sends Range.
    @Test func aWeakETagAloneIsNoValidatorToResumeWith() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 8 * MiB, seed: 2706)
            origin.put("/weak.bin", body)
            var b = TestOrigin.Behavior.throttled(2 * MiB)
            b.weakETag = true
            b.omitLastModified = true
            b.ignoreIfRange = true
            origin.setBehavior("/weak.bin", b)
            var client = try daemon.client()
            let task = try client.startDownload(origin.url("/weak.bin"))
            try eventually("1 MiB durable") { try client.task(task.id).bytesDurable >= Int64(MiB) ? true : nil }
            daemon.kill9()
            let before = origin.requests("/weak.bin").count
            b.bytesPerSecond = nil
            origin.setBehavior("/weak.bin", b)
            try daemon.restart()
            client = try daemon.client()
            let done = try client.waitFor(task: task.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let after = origin.requests("/weak.bin").dropFirst(before)
            #expect(after.allSatisfy { $0.range == nil && $0.ifRange == nil }, "\(after.map { $0.range ?? "-" })")
        }
    }

    /// The real thing: BusyBox httpd (Debian's busybox, the web server of countless routers) answers 206 to a
    /// Range whatever If-Range says. A download paused, the file replaced by another of the same length, resumed:
    /// the resumed 206 names the new version, so the download starts over and the file is the new one, whole.
    @Test(arguments: [1, 0])
    func busyboxHTTPDNeverGetsASplice(connections: Int) async throws {
        let www = try TempDir()
        defer { www.remove() }
        let v1 = TestOrigin.randomBytes(count: 16 * MiB, seed: 2707)
        let v2 = TestOrigin.randomBytes(count: 16 * MiB, seed: 2708)
        try Data(v1).write(to: URL(fileURLWithPath: www.path + "/big.bin"))
        let httpd = try ProxyProcess.busyboxHTTPD(home: www.path)
        defer { httpd.stop() }
        try await withDaemon { daemon, _ in
            let client = try daemon.client()
            _ = try client.openSession("test.session")
            let task = try client.createTask(TaskCreateParams(
                session: "test.session", url: httpd.url() + "/big.bin", start: true, bandwidthLimit: Int64(2 * MiB),
                maxConnections: connections == 0 ? nil : connections))
            try eventually("1 MiB durable") { try client.task(task.id).bytesDurable >= Int64(MiB) ? true : nil }
            _ = try client.suspend(task.id)
            // Another version of the same length, with another mtime (BusyBox's ETag is mtime-size).
            let next = www.path + "/big.bin.next"
            try Data(v2).write(to: URL(fileURLWithPath: next))
            var times = [timespec(tv_sec: 1_700_000_000, tv_nsec: 0), timespec(tv_sec: 1_700_000_000, tv_nsec: 0)]
            #expect(utimensat(AT_FDCWD, next, &times, 0) == 0)
            #expect(rename(next, www.path + "/big.bin") == 0)
            try client.update(task.id, bandwidthLimit: 0)
            _ = try client.resume(task.id)
            let done = try client.waitFor(task: task.id, state: .completed)
            let sha = try sha256(ofFile: done.location!)
            #expect(sha == TestOrigin.sha256Hex(v2), "spliced (v1 whole: \(sha == TestOrigin.sha256Hex(v1)))")
            try Self.expectRestart(client, task: task.id)
        }
    }

    /// Two versions whose strong ETags differ only in a byte that is not UTF-8 (`"v\xE4"`, then `"v\xE5"`), with
    /// the same Last-Modified and length, under a server that ignores If-Range and writes its head in ISO-8859-1.
    /// Read as U+FFFD (swift-nio's decoding) both ETags would be `"v�"` and the 206 of the new version would be
    /// appended; read as Latin-1 they differ, and the download starts over.
    @Test func etagsThatDifferOnlyInALatin1ByteAreDifferent() async throws {
        try await withDaemon { daemon, origin in
            let v1 = TestOrigin.randomBytes(count: 8 * MiB, seed: 2711)
            let v2 = TestOrigin.randomBytes(count: 8 * MiB, seed: 2712)
            let date = "Tue, 24 Nov 2026 10:00:00 GMT"
            origin.put("/latin.bin", v1, etag: "\"v\u{E4}\"", lastModified: date)
            var slow = TestOrigin.Behavior.throttled(2 * MiB)
            slow.ignoreIfRange = true
            slow.headInLatin1 = true
            origin.setBehavior("/latin.bin", slow)
            let client = try daemon.client()
            let task = try client.startDownload(origin.url("/latin.bin"), maxConnections: 1)
            try eventually("1 MiB durable") { try client.task(task.id).bytesDurable >= Int64(MiB) ? true : nil }
            _ = try client.suspend(task.id)
            try eventually("no response running") { origin.concurrentResponses("/latin.bin") == 0 ? true : nil }
            let before = origin.requests("/latin.bin").count
            origin.put("/latin.bin", v2, etag: "\"v\u{E5}\"", lastModified: date)
            var lying = Self.ignoringIfRange
            lying.headInLatin1 = true
            origin.setBehavior("/latin.bin", lying)
            _ = try client.resume(task.id)
            let done = try client.waitFor(task: task.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(v2), "spliced")
            let resumed = try #require(origin.requests("/latin.bin").dropFirst(before).first)
            #expect(resumed.ifRange != nil && resumed.status == 206, "\(resumed.range ?? "-") → \(resumed.status)")
            try Self.expectRestart(client, task: task.id)
        }
    }

    static var ignoringIfRange: TestOrigin.Behavior {
        var b = TestOrigin.Behavior()
        b.ignoreIfRange = true
        return b
    }

    /// The task's events (replayed from the journal) include a restart from 0 that discarded kept bytes
    /// because the resource changed.
    static func expectRestart(_ client: HalfTunesClient, task: Int64) throws {
        let events = try EventRecorder(client: client, session: "test.session", after: 0)
        defer { events.close() }
        try events.wait(for: "didResumeAtOffset 0 resourceChanged", timeout: 10) {
            guard $0.task == task, case .didResumeAtOffset(0, _, let discarded?, "resourceChanged") = $0.payload else {
                return false
            }
            return discarded > 0
        }
    }
}
