// Transfer against a real HTTP origin on 127.0.0.1: full downloads, stop and resume, restarts, failures.
import HalfTunesCore
import HalfTunesEngine
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite struct TransferTests {
    @Test func fullDownloadMatchesAndCheckpointsAreSane() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 3 << 20, seed: 1)
            f.origin.put("/a.bin", body)
            // Throttled so that several checkpoints happen during the body.
            var behavior = TestOrigin.Behavior()
            behavior.bytesPerSecond = 12 << 20
            f.origin.setBehavior("/a.bin", behavior)
            let partial = f.dir.path("a.partial")
            let (outcome, observer) = await f.run("/a.bin", partial: partial, checkpointInterval: 0.05)
            let etag = try #require(f.origin.validators("/a.bin")?.etag)
            guard case .completed(let total, let validators) = outcome else {
                Issue.record("expected completed, got \(outcome)")
                return
            }
            #expect(total == Int64(body.count))
            #expect(validators.etag == etag)
            #expect(TestOrigin.sha256Hex(try readFile(partial)) == TestOrigin.sha256Hex(body))

            let s = observer.snapshot
            #expect(s.starts.count == 1)
            #expect(s.starts.first?.status == 200)
            #expect(s.starts.first?.offset == 0)
            #expect(s.starts.first?.expectedTotal == Int64(body.count))
            #expect(s.eventsBeforeStart == 0)
            // Checkpoints while it runs; a complete download's last length comes with its outcome (the core
            // journals it with the publish intent), not as a checkpoint of its own.
            #expect(s.checkpoints.count >= 2, "only \(s.checkpoints.count) checkpoints")
            #expect(s.checkpoints.allSatisfy { $0.durable <= total })
            observer.expectSaneCheckpoints()
            #expect(s.writes.map(\.delta).reduce(0, +) == total)
            #expect(s.writes.last?.total == total)
            #expect(s.writes.last?.expected == total)

            let request = try #require(f.origin.requests("/a.bin").first)
            #expect(request.range == nil)
            #expect(request.ifRange == nil)
            #expect(request.header("Accept-Encoding") == "identity")
            #expect(request.header("User-Agent") == "halftunesd/\(HalfTunes.version)")
        }
    }

    /// Durable ranges with a gap (left by segments) and torn bytes after them, one connection allowed: the first
    /// request resumes at the end of the first range and stops where kept data begins; the rest is asked for
    /// as exactly its range with If-Range; the file is whole.
    @Test func oneRequestResumesRangesWithGapsFromTheFirstEnd() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 300_000, seed: 21)
            f.origin.put("/g.bin", body)
            let (etag, lastModified) = try #require(f.origin.validators("/g.bin"))
            let partial = f.dir.path("g.partial")
            var onDisk = Array(body.prefix(150_000))
            for i in 100_000..<120_000 { onDisk[i] = 0xEE } // a gap: never durable, whatever it holds
            onDisk += [UInt8](repeating: 0xFF, count: 30_000) // torn: past the last range
            try writeFile(partial, onDisk)
            let durable = ByteRanges([0..<100_000, 120_000..<150_000])
            let validators = Validators(etag: etag, lastModified: lastModified)
            let (outcome, observer) = await f.run("/g.bin", partial: partial, durable: durable, validators: validators)
            #expect(outcome == .completed(totalBytes: Int64(body.count), validators: validators))
            #expect(try readFile(partial) == body)
            let requests = f.origin.requests("/g.bin")
            #expect(requests.map(\.range) == ["bytes=100000-", "bytes=150000-299999"])
            #expect(requests.allSatisfy { $0.ifRange == etag && $0.status == 206 })
            #expect(observer.snapshot.starts.first?.offset == 100_000)
            observer.expectSaneCheckpoints()
        }
    }

    @Test func stopThenResumeAppendsWithRangeAndIfRange() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 4 << 20, seed: 2)
            f.origin.put("/s.bin", body)
            var stall = TestOrigin.Behavior()
            stall.stallAfterBytes = 1_500_000
            f.origin.setBehavior("/s.bin", stall)
            let partial = f.dir.path("s.partial")
            let observer = RecordingObserver(partialPath: partial)
            let transfer = f.transfer(AttemptRequest.download(taskID: 7, url: f.origin.url("/s.bin"), partialPath: partial),
                                      observer: observer)
            #expect(transfer.taskID == 7)
            let running = Task { await transfer.run() }
            try await waitUntil("1,500,000 bytes received", stopping: transfer, running) { (observer.snapshot.writes.last?.total ?? 0) >= 1_500_000 }
            transfer.stop()
            transfer.stop()  // idempotent
            let outcome = await running.value
            #expect(outcome == .stopped(durableBytes: 1_500_000))
            #expect(PartialFile.length(path: partial) == 1_500_000)
            #expect(observer.snapshot.checkpoints.last?.durable == 1_500_000)
            observer.expectSaneCheckpoints()
            let validators = try #require(observer.snapshot.starts.first?.validators)

            f.origin.setBehavior("/s.bin", TestOrigin.Behavior())
            let (second, observer2) = await f.run("/s.bin", partial: partial, durableOffset: 1_500_000,
                                                  validators: validators)
            #expect(second == .completed(totalBytes: Int64(body.count), validators: validators))
            #expect(TestOrigin.sha256Hex(try readFile(partial)) == TestOrigin.sha256Hex(body))
            let start = try #require(observer2.snapshot.starts.first)
            #expect(start.status == 206)
            #expect(start.offset == 1_500_000)
            #expect(start.discardedBytes == 0)
            #expect(start.expectedTotal == Int64(body.count))
            observer2.expectSaneCheckpoints()
            let resumed = try #require(f.origin.requests("/s.bin").last)
            #expect(resumed.range == "bytes=1500000-")
            #expect(resumed.ifRange == validators.etag)
            #expect(resumed.status == 206)
            #expect(resumed.bodyBytesSent == Int64(body.count) - 1_500_000)
        }
    }

    @Test func changedResourceRestartsFromZero() async throws {
        try await EngineFixture.with { f in
            let v1 = TestOrigin.randomBytes(count: 300_000, seed: 3)
            f.origin.put("/c.bin", v1)
            let old = try #require(f.origin.validators("/c.bin"))
            let partial = f.dir.path("c.partial")
            try writeFile(partial, Array(v1.prefix(100_000)))
            let v2 = TestOrigin.randomBytes(count: 250_000, seed: 4)
            f.origin.change("/c.bin", to: v2)

            let (outcome, observer) = await f.run("/c.bin", partial: partial, durableOffset: 100_000,
                                                  validators: Validators(etag: old.etag, lastModified: old.lastModified))
            guard case .completed(let total, let validators) = outcome else {
                Issue.record("expected completed, got \(outcome)")
                return
            }
            #expect(total == 250_000)
            #expect(validators.etag == f.origin.validators("/c.bin")?.etag)
            #expect(try readFile(partial) == v2)
            let start = try #require(observer.snapshot.starts.first)
            #expect(start.status == 200)
            #expect(start.offset == 0)
            #expect(start.discardedBytes == 100_000)
            #expect(start.reason == "resourceChanged")
            // The truncation is checkpointed before anything else.
            #expect(observer.snapshot.checkpoints.first?.durable == 0)
            observer.expectSaneCheckpoints()
            let request = try #require(f.origin.requests("/c.bin").last)
            #expect(request.range == "bytes=100000-")
            #expect(request.ifRange == old.etag)
        }
    }

    @Test func serverIgnoringRangeRestarts() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 200_000, seed: 5)
            f.origin.put("/i.bin", body)
            var behavior = TestOrigin.Behavior()
            behavior.ignoreRange = true
            f.origin.setBehavior("/i.bin", behavior)
            let current = try #require(f.origin.validators("/i.bin"))
            let partial = f.dir.path("i.partial")
            try writeFile(partial, Array(body.prefix(50_000)))
            let (outcome, observer) = await f.run("/i.bin", partial: partial, durableOffset: 50_000,
                                                  validators: Validators(etag: current.etag, lastModified: nil))
            guard case .completed(200_000, _) = outcome else {
                Issue.record("expected completed, got \(outcome)")
                return
            }
            #expect(try readFile(partial) == body)
            let start = try #require(observer.snapshot.starts.first)
            #expect(start.reason == "rangeNotHonored")
            #expect(start.discardedBytes == 50_000)
        }
    }

    @Test func noValidatorMeansNoRangeAndAFreshStart() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 100_000, seed: 6)
            f.origin.put("/n.bin", body)
            let partial = f.dir.path("n.partial")
            try writeFile(partial, Array(body.prefix(40_000)))
            let (outcome, observer) = await f.run("/n.bin", partial: partial, durableOffset: 40_000, validators: nil)
            guard case .completed(100_000, _) = outcome else {
                Issue.record("expected completed, got \(outcome)")
                return
            }
            #expect(try readFile(partial) == body)
            #expect(f.origin.requests("/n.bin").first?.range == nil)
            let start = try #require(observer.snapshot.starts.first)
            #expect(start.reason == "noValidator")
            #expect(start.discardedBytes == 40_000)
        }
    }

    @Test func alreadyCompleteAnswersWithRangeNotSatisfiable() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 64_000, seed: 7)
            f.origin.put("/done.bin", body)
            let v = try #require(f.origin.validators("/done.bin"))
            let partial = f.dir.path("done.partial")
            try writeFile(partial, body)
            let validators = Validators(etag: v.etag, lastModified: v.lastModified)
            let (outcome, observer) = await f.run("/done.bin", partial: partial, durableOffset: 64_000,
                                                  validators: validators)
            #expect(outcome == .completed(totalBytes: 64_000, validators: validators))
            #expect(try readFile(partial) == body)
            #expect(f.origin.requests("/done.bin").last?.status == 416)
            // Nothing new became durable: no checkpoint (the outcome carries the length).
            #expect(observer.snapshot.checkpoints.isEmpty)
        }
    }
}
