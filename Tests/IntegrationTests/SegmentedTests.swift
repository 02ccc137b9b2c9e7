// Segmented downloads through the real binaries: several ranges of one version, counted against the host limit.
import Foundation
import HalfTunesJournal
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Segmented downloads", .serialized)
struct SegmentedTests {
    /// Waits until the task's download runs over more than one connection with `durable` bytes durable.
    static func waitUntilSplit(_ client: HalfTunesClient, _ id: Int64, durable: Int64 = 0) throws {
        try eventually("task \(id) split, with \(durable) bytes durable") {
            let info = try client.task(id)
            return (info.connections ?? 0) > 1 && info.bytesDurable >= durable ? true : nil
        }
    }

    /// Every response throttled like nginx `limit_rate`: with default settings the download is split, each
    /// further request asks for exactly its range with `If-Range` and gets a 206 of that version, the task and
    /// the daemon say how many connections are in use, and the file is whole.
    @Test func aThrottledDownloadIsSplitWithDefaultSettings() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 24 * MiB, seed: 60)
            origin.put("/split.bin", body)
            origin.setBehavior("/split.bin", .throttled(2 * MiB))
            let client = try daemon.client()
            let t = try client.startDownload(origin.url("/split.bin"))
            let seen = try eventually("more than one connection") {
                let info = try client.task(t.id)
                return (info.connections ?? 0) > 1 ? info : nil
            }
            #expect(seen.maxConnections == nil, "the session's setting applies")
            let status = try client.status()
            #expect((status.connections ?? 0) > (status.transfers ?? 0), "status counts the extra connections")
            let shown = try ctl(["show", String(t.id)], socket: daemon.socketPath)
            #expect(shown.stdout.contains("Connections"), "\(shown.stdout)")

            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            #expect(done.connections == nil && done.bytesReceived == Int64(body.count))
            let requests = origin.requests("/split.bin")
            #expect(requests.first?.range == nil)
            #expect(requests.count >= 2)
            for extra in requests.dropFirst() {
                #expect(extra.range?.wholeMatch(of: /bytes=\d+-\d+/) != nil, "\(String(describing: extra.range))")
                #expect(extra.ifRange == requests.first?.etag && extra.status == 206)
            }
            let most = origin.mostConcurrentResponses("/split.bin")
            #expect(most >= 2 && most <= 6, "\(most) at once (max-connections-per-host 6, 8 per task)")
            #expect(partialFiles(in: daemon.downloadsDir).isEmpty)
        }
    }

    /// `max-connections-per-host` counts connections: a split download uses at most that many, and a task
    /// queued for the same host gets its connection back at once rather than after the first task ends.
    @Test func theHostLimitCountsConnectionsAndAQueuedTaskGetsOneBack() async throws {
        try await withDaemon { daemon, origin in
            let client = try daemon.client()
            _ = try client.setLimits(maxConnectionsPerHost: 3)
            let big = TestOrigin.randomBytes(count: 32 * MiB, seed: 61)
            let small = TestOrigin.randomBytes(count: 3 * MiB, seed: 62)
            origin.put("/big.bin", big)
            origin.put("/small.bin", small)
            origin.setBehavior("/big.bin", .throttled(2 * MiB))
            origin.setBehavior("/small.bin", .throttled(2 * MiB))
            let a = try client.startDownload(origin.url("/big.bin"))
            try eventually("three connections") { (try client.task(a.id).connections ?? 0) == 3 ? true : nil }
            let b = try client.startDownload(origin.url("/small.bin"))
            let doneB = try client.waitFor(task: b.id, state: .completed)
            #expect(try client.task(a.id).state == .running, "the second task did not wait for the first to end")
            #expect(try sha256(ofFile: doneB.location!) == TestOrigin.sha256Hex(small))
            let doneA = try client.waitFor(task: a.id, state: .completed)
            #expect(try sha256(ofFile: doneA.location!) == TestOrigin.sha256Hex(big))
            #expect(origin.mostConcurrentResponses() <= 3, "\(origin.mostConcurrentResponses()) responses at once")
            #expect(origin.mostConcurrentResponses("/big.bin") == 3)
        }
    }

    /// One connection when asked (`download --connections 1`, `session open --max-connections-per-task 1`), and
    /// clear errors for values out of range.
    @Test func oneConnectionWhenAskedAndBadValuesAreRefused() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 12 * MiB, seed: 63)
            origin.put("/one.bin", body)
            origin.setBehavior("/one.bin", .throttled(4 * MiB))
            let out = try ctl(["--json", "download", origin.url("/one.bin"), "--connections", "1", "--wait"],
                              socket: daemon.socketPath)
            #expect(out.status == 0, "\(out.stderr)")
            #expect(origin.requests("/one.bin").count == 1)

            let opened = try ctl(["session", "open", "single", "--max-connections-per-task", "1"], socket: daemon.socketPath)
            #expect(opened.status == 0, "\(opened.stderr)")
            #expect(opened.stdout.contains("at most 1 per download"), "\(opened.stdout)")
            let client = try daemon.client()
            let t = try client.startDownload(origin.url("/one.bin"), session: "single", destination: "single.bin")
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            #expect(origin.requests("/one.bin").count == 2)

            for bad in [0, 17] {
                #expect(rpcCode { _ = try client.createTask(TaskCreateParams(session: "single", url: origin.url("/one.bin"),
                                                                            maxConnections: bad)) } == .invalidParams)
                #expect(rpcCode { _ = try client.openSession("bad", configuration: SessionConfiguration(maxConnectionsPerTask: bad)) }
                    == .invalidParams)
            }
            #expect(rpcCode { _ = try client.createTask(TaskCreateParams(session: "single", url: origin.url("/one.bin"),
                                                                        kind: .data, maxConnections: 2)) } == .invalidParams)
            let refused = try ctl(["download", origin.url("/one.bin"), "--connections", "0"], socket: daemon.socketPath)
            #expect(refused.status != 0 && refused.stderr.contains("--connections"), "\(refused.stderr)")
        }
    }

    /// Servers that misbehave on further connections only (the first is served well): ranges ignored, a wrong
    /// `Content-Range`, `503` with `Retry-After`, a dropped connection. The download goes on in the same
    /// attempt, with fewer connections or by fetching the lost range again, and the file is whole.
    @Test func misbehavingFurtherConnectionsNeverBreakTheFile() async throws {
        try await withDaemon { daemon, origin in
            var faults: [(String, TestOrigin.Behavior)] = []
            var b = TestOrigin.Behavior.throttled(2 * MiB)
            b.faultsFromRequest = 1
            var ignore = b
            ignore.ignoreRange = true
            faults.append(("ignore", ignore))
            var wrong = b
            wrong.wrongContentRange = true
            faults.append(("wrong", wrong))
            var busy = b
            busy.failStatus = 503
            busy.failTimes = 2
            busy.retryAfter = "1"
            faults.append(("busy", busy))
            var drop = b
            drop.dropAfterBytes = Int64(MiB / 2)
            drop.dropTimes = 1
            faults.append(("drop", drop))
            let client = try daemon.client()
            for (index, (name, behavior)) in faults.enumerated() {
                let body = TestOrigin.randomBytes(count: 12 * MiB, seed: UInt64(70 + index))
                origin.put("/\(name).bin", body)
                origin.setBehavior("/\(name).bin", behavior)
                let t = try client.startDownload(origin.url("/\(name).bin"))
                let done = try client.waitFor(task: t.id, state: .completed)
                #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body), "\(name)")
                #expect(done.attempts == 1, "\(name): no attempt failed")
                let requests = origin.requests("/\(name).bin")
                #expect(requests.count >= 2, "\(name): a further connection was tried")
                #expect(requests.first?.status == 200, "\(name)")
            }
        }
    }

    /// kill -9 while split: after the restart every missing range is fetched from where its durable data
    /// ends, with `If-Range`, and the file is whole.
    @Test func killNineWhileSplitResumesEveryRange() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 24 * MiB, seed: 64)
            origin.put("/k.bin", body)
            origin.setBehavior("/k.bin", .throttled(2 * MiB))
            var client = try daemon.client()
            let t = try client.startDownload(origin.url("/k.bin"))
            try Self.waitUntilSplit(client, t.id, durable: Int64(4 * MiB))
            daemon.kill9()
            let journal = try Journal(path: daemon.stateDir + "/journal.sqlite")
            let durable = try #require(try journal.loadTask(t.id)).durableRanges
            try journal.close()
            #expect(!durable.isPrefix, "durable ranges with gaps: \(durable)")
            let before = origin.requests("/k.bin").count
            origin.setBehavior("/k.bin", TestOrigin.Behavior())

            try daemon.restart()
            client = try daemon.client()
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let etag = origin.requests("/k.bin").first?.etag
            let resumed = origin.requests("/k.bin").dropFirst(before)
            #expect(resumed.allSatisfy { $0.status == 206 && $0.ifRange == etag }, "\(resumed.map(\.range))")
            // Each gap is asked for from its start (more requests may split a gap further).
            let starts = Set(resumed.compactMap(\.rangeStart))
            for gap in durable.gaps(total: Int64(body.count)) {
                #expect(starts.contains(gap.lowerBound), "gap \(gap) not resumed at its start: \(resumed.map(\.range))")
            }
        }
    }

    /// Paused while split: everything received is durable, and the resume fetches only the missing ranges.
    /// Canceled with resume data while split: a new task from the resume data completes the same file.
    @Test func pauseAndResumeDataKeepEveryRange() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 24 * MiB, seed: 65)
            origin.put("/pr.bin", body)
            origin.setBehavior("/pr.bin", .throttled(2 * MiB))
            let client = try daemon.client()
            let t = try client.startDownload(origin.url("/pr.bin"))
            try Self.waitUntilSplit(client, t.id)
            try eventually("4 MiB received") { try client.task(t.id).bytesReceived >= Int64(4 * MiB) ? true : nil }
            let paused = try client.suspend(t.id)
            #expect(paused.state == .suspended)
            #expect(paused.bytesReceived == paused.bytesDurable, "everything received is durable once paused")
            _ = try client.resume(t.id)
            try eventually("8 MiB durable") { try client.task(t.id).bytesDurable >= Int64(8 * MiB) ? true : nil }

            let r = try ctl(["cancel", String(t.id), "--resume-data"], socket: daemon.socketPath)
            #expect(r.status == 0, "\(r.stderr)")
            let resumeData = r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            let canceled = try client.task(t.id)
            #expect(canceled.state == .canceled && canceled.bytesDurable >= Int64(8 * MiB))
            let before = origin.requests("/pr.bin").count
            let again = try ctl(["download", "--session", "test.session", "--resume-data", resumeData, "--wait"],
                                socket: daemon.socketPath)
            #expect(again.status == 0, "\(again.stdout) \(again.stderr)")
            let second = try #require(try client.tasks(session: "test.session").first { $0.id != t.id })
            #expect(second.state == .completed)
            #expect(try sha256(ofFile: second.location!) == TestOrigin.sha256Hex(body))
            let resumed = origin.requests("/pr.bin").dropFirst(before)
            #expect(resumed.allSatisfy { $0.status == 206 }, "\(resumed.map(\.range))")
            // Only the missing ranges were fetched again (give or take what a request that is cut short was sent
            // before it stopped reading: at 2 MiB/s per response, far less than 1 MiB).
            let fetched = resumed.reduce(Int64(0)) { $0 + $1.bodyBytesSent }
            #expect(fetched <= Int64(body.count) - canceled.bytesDurable + Int64(MiB), "fetched \(fetched) again")
        }
    }

    /// The file changes on the server while a split download is stopped by kill -9: the resumed ranges are
    /// answered with the new version, nothing of the two versions is mixed, the download starts again from
    /// byte 0 and the new version is published.
    @Test func aFileChangedWhileSplitIsNeverSpliced() async throws {
        try await withDaemon { daemon, origin in
            let v1 = TestOrigin.randomBytes(count: 24 * MiB, seed: 66)
            let v2 = TestOrigin.randomBytes(count: 24 * MiB, seed: 67)
            origin.put("/chg.bin", v1)
            origin.setBehavior("/chg.bin", .throttled(2 * MiB))
            var client = try daemon.client()
            let t = try client.startDownload(origin.url("/chg.bin"))
            try Self.waitUntilSplit(client, t.id, durable: Int64(2 * MiB))
            daemon.kill9()
            let before = origin.requests("/chg.bin").count
            origin.change("/chg.bin", to: v2)
            origin.setBehavior("/chg.bin", TestOrigin.Behavior())
            try daemon.restart()
            client = try daemon.client()
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(v2))
            let resumed = Array(origin.requests("/chg.bin").dropFirst(before))
            #expect(resumed.first?.ifRange != nil && resumed.first?.status == 200, "\(resumed.map(\.range))")
        }
    }
}
