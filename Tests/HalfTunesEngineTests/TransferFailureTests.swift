// Transfer failures against a real origin: HTTP errors, drops, short bodies, bad ranges, timeouts, bad URLs.
import HalfTunesCore
import HalfTunesEngine
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite struct TransferFailureTests {
    @Test func notFoundIsPermanentAndWritesNoErrorBody() async throws {
        try await EngineFixture.with { f in
            let partial = f.dir.path("missing.partial")
            let (outcome, observer) = await f.run("/missing.bin", partial: partial)
            let failure = try #require(outcome.failure, "\(outcome)")
            #expect(failure.error.code == TaskErrorCode.httpStatus)
            #expect(failure.error.httpStatus == 404)
            #expect(failure.error.message == "HTTP 404 Not Found from \(f.origin.url("/missing.bin"))")
            #expect(!failure.isTransient)
            #expect(failure.durableBytes == 0)
            #expect(PartialFile.length(path: partial) == 0)
            #expect(observer.snapshot.starts.isEmpty)
        }
    }

    @Test func errorStatusOnAResumeKeepsThePartialIntact() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 10_000, seed: 8)
            f.origin.put("/gone.bin", body)
            let v = try #require(f.origin.validators("/gone.bin"))
            var behavior = TestOrigin.Behavior()
            behavior.failStatus = 503
            behavior.retryAfter = "7"
            f.origin.setBehavior("/gone.bin", behavior)
            let partial = f.dir.path("gone.partial")
            try writeFile(partial, Array(body.prefix(4000)))
            let (outcome, _) = await f.run("/gone.bin", partial: partial, durableOffset: 4000,
                                           validators: Validators(etag: v.etag, lastModified: nil))
            let failure = try #require(outcome.failure, "\(outcome)")
            #expect(failure.error.code == TaskErrorCode.serverBusy)
            #expect(failure.error.httpStatus == 503)
            #expect(failure.isTransient)
            #expect(failure.retryAfter == 7)
            #expect(failure.durableBytes == 4000)
            #expect(try readFile(partial) == Array(body.prefix(4000)))
        }
    }

    @Test func droppedConnectionIsTransientWithTheDurablePrefix() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 3 << 20, seed: 9)
            f.origin.put("/d.bin", body)
            var behavior = TestOrigin.Behavior()
            behavior.dropAfterBytes = 1_234_567
            f.origin.setBehavior("/d.bin", behavior)
            let partial = f.dir.path("d.partial")
            let (outcome, observer) = await f.run("/d.bin", partial: partial)
            let failure = try #require(outcome.failure, "\(outcome)")
            #expect(failure.error.code == TaskErrorCode.connectionLost)
            #expect(failure.isTransient)
            #expect(failure.durableBytes <= 1_234_567)
            #expect(failure.durableBytes > 0)
            let written = try readFile(partial)
            #expect(Int64(written.count) == failure.durableBytes)
            #expect(written[...] == body.prefix(written.count))
            #expect(observer.snapshot.checkpoints.last?.durable == failure.durableBytes)
            observer.expectSaneCheckpoints()

            // The next attempt resumes from there and completes.
            let validators = try #require(observer.snapshot.starts.first?.validators)
            let (second, _) = await f.run("/d.bin", partial: partial, durableOffset: failure.durableBytes,
                                          validators: validators)
            #expect(second == .completed(totalBytes: Int64(body.count), validators: validators))
            #expect(TestOrigin.sha256Hex(try readFile(partial)) == TestOrigin.sha256Hex(body))
        }
    }

    @Test func shortBodyNeverCompletes() async throws {
        for chunked in [false, true] {
            try await EngineFixture.with { f in
                f.origin.put("/short.bin", TestOrigin.randomBytes(count: 100_000, seed: 10))
                var behavior = TestOrigin.Behavior()
                behavior.shortBody = true
                behavior.omitContentLength = chunked
                f.origin.setBehavior("/short.bin", behavior)
                let partial = f.dir.path("short.partial")
                let (outcome, _) = await f.run("/short.bin", partial: partial)
                let failure = try #require(outcome.failure, "chunked \(chunked): \(outcome)")
                #expect(failure.error.code == TaskErrorCode.connectionLost)
                #expect(failure.isTransient)
                #expect(failure.durableBytes == PartialFile.length(path: partial))
                #expect(failure.durableBytes <= 50_000)
            }
        }
    }

    @Test func wrongContentRangeDiscardsThePartial() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 20_000, seed: 11)
            f.origin.put("/w.bin", body)
            let v = try #require(f.origin.validators("/w.bin"))
            var behavior = TestOrigin.Behavior()
            behavior.wrongContentRange = true
            f.origin.setBehavior("/w.bin", behavior)
            let partial = f.dir.path("w.partial")
            try writeFile(partial, Array(body.prefix(5000)))
            let (outcome, observer) = await f.run("/w.bin", partial: partial, durableOffset: 5000,
                                                  validators: Validators(etag: v.etag, lastModified: nil))
            let failure = try #require(outcome.failure, "\(outcome)")
            #expect(failure.error.code == TaskErrorCode.invalidResponse)
            #expect(failure.isTransient)
            #expect(failure.durableBytes == 0)
            #expect(PartialFile.length(path: partial) == 0)
            #expect(observer.snapshot.checkpoints.last?.durable == 0)
        }
    }

    @Test func idleTimeoutWhileStalled() async throws {
        try await EngineFixture.with { f in
            f.origin.put("/stall.bin", TestOrigin.randomBytes(count: 500_000, seed: 12))
            var behavior = TestOrigin.Behavior()
            behavior.stallAfterBytes = 100_000
            f.origin.setBehavior("/stall.bin", behavior)
            let partial = f.dir.path("stall.partial")
            let (outcome, _) = await f.run("/stall.bin", partial: partial, timeout: 0.3)
            let failure = try #require(outcome.failure, "\(outcome)")
            #expect(failure.error.code == TaskErrorCode.timedOut)
            #expect(failure.isTransient)
            #expect(failure.durableBytes == 100_000)
            #expect(PartialFile.length(path: partial) == 100_000)
        }
    }

    @Test func stopBeforeRunSendsNothing() async throws {
        try await EngineFixture.with { f in
            f.origin.put("/never.bin", [1, 2, 3])
            let partial = f.dir.path("never.partial")
            try writeFile(partial, [9, 9, 9, 9])
            let observer = RecordingObserver(partialPath: partial)
            let transfer = f.transfer(AttemptRequest.download(taskID: 2, url: f.origin.url("/never.bin"), partialPath: partial,
                                                      durableOffset: 2), observer: observer)
            transfer.stop()
            #expect(await transfer.run() == .stopped(durableBytes: 2))
            #expect(f.origin.requests("/never.bin").isEmpty)
            #expect(try readFile(partial) == [9, 9])
        }
    }

    @Test func redirectsAreFollowedAndReported() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 5000, seed: 13)
            f.origin.put("/target.bin", body)
            var behavior = TestOrigin.Behavior()
            behavior.redirectTo = f.origin.url("/target.bin")
            f.origin.setBehavior("/from.bin", behavior)
            let partial = f.dir.path("r.partial")
            let (outcome, observer) = await f.run("/from.bin", partial: partial)
            guard case .completed(5000, _) = outcome else {
                Issue.record("expected completed, got \(outcome)")
                return
            }
            #expect(try readFile(partial) == body)
            #expect(observer.snapshot.starts.first?.finalURL == f.origin.url("/target.bin"))

            var loop = TestOrigin.Behavior()
            loop.redirectTo = f.origin.url("/loop.bin")
            f.origin.setBehavior("/loop.bin", loop)
            let (looped, _) = await f.run("/loop.bin", partial: f.dir.path("loop.partial"))
            let failure = try #require(looped.failure, "\(looped)")
            #expect(failure.error.code == TaskErrorCode.tooManyRedirects)
            #expect(!failure.isTransient)
        }
    }

    @Test func connectionRefusedAndBadURLs() async throws {
        try await EngineFixture.with { f in
            let closed = try await TestOrigin.start()
            let url = closed.url("/x")
            try await closed.shutdown()
            let observer = RecordingObserver(partialPath: f.dir.path("x.partial"))
            let refused = await f.transfer(AttemptRequest.download(taskID: 3, url: url, partialPath: f.dir.path("x.partial")),
                                           observer: observer).run()
            let failure = try #require(refused.failure, "\(refused)")
            #expect(failure.error.code == TaskErrorCode.connectionRefused)
            #expect(failure.isTransient)

            let ftp = await f.transfer(AttemptRequest.download(taskID: 4, url: "ftp://127.0.0.1/x",
                                                       partialPath: f.dir.path("y.partial")), observer: observer).run()
            let bad = try #require(ftp.failure, "\(ftp)")
            #expect(bad.error.code == TaskErrorCode.invalidResponse)
            #expect(bad.error.message.contains("ftp"))
            #expect(!bad.isTransient)
        }
    }

    @Test func unwritablePartialIsAnIOError() async throws {
        try await EngineFixture.with { f in
            f.origin.put("/io.bin", [1, 2, 3])
            let (outcome, _) = await f.run("/io.bin", partial: f.dir.path("no-such-dir/io.partial"))
            let failure = try #require(outcome.failure, "\(outcome)")
            #expect(failure.error.code == TaskErrorCode.ioError)
            #expect(failure.error.message.contains("no-such-dir/io.partial"))
            #expect(!failure.isTransient)
            #expect(f.origin.requests("/io.bin").isEmpty)
        }
    }
}
