// Segmented downloads through the engine against the test origin: several ranged requests into one file.
import HalfTunesEngine
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite struct SegmentedTransferTests {
    static let MiB = 1 << 20

    /// Each response of the origin is throttled (like nginx `limit_rate`): the download opens further
    /// requests, each for exactly its range with If-Range, at the same time, and the file is whole.
    @Test func aThrottledDownloadIsSplitIntoRangesOfOneVersion() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 32 * Self.MiB + 123, seed: 31)
            f.origin.put("/split.bin", body)
            var slow = TestOrigin.Behavior()
            slow.bytesPerSecond = 4 * Self.MiB
            f.origin.setBehavior("/split.bin", slow)
            let (etag, _) = try #require(f.origin.validators("/split.bin"))
            let partial = f.dir.path("split.partial")
            let (outcome, observer) = await f.run("/split.bin", partial: partial, maxConnections: 4)
            #expect(outcome == .completed(totalBytes: Int64(body.count), validators: observer.snapshot.starts.first!.validators))
            #expect(try readFile(partial) == body)
            let requests = f.origin.requests("/split.bin")
            #expect(requests.count >= 3, "\(requests.map(\.range))")
            #expect(requests.first?.range == nil)
            for extra in requests.dropFirst() {
                #expect(extra.range?.wholeMatch(of: /bytes=\d+-\d+/) != nil, "\(String(describing: extra.range))")
                #expect(extra.ifRange == etag && extra.status == 206)
            }
            let sorted = requests.map(\.arrivedAt).sorted()
            #expect(sorted[1] - sorted[0] < Double(body.count) / Double(4 * Self.MiB) - 1, "the requests overlap")
            observer.expectSaneCheckpoints()
            let totals = observer.snapshot.writes.map(\.total)
            #expect(zip(totals, totals.dropFirst()).allSatisfy { $0 <= $1 }, "one stream of totals")
            #expect(totals.last == Int64(body.count))
            #expect(observer.snapshot.checkpoints.contains { !$0.ranges.isPrefix }, "ranges were journaled as they came")
        }
    }

    /// A 416 to a further request means another version: every request stops, the file is emptied, and the
    /// attempt fails transiently; the next attempt starts from byte 0 and completes.
    @Test func aRefusedRangeStopsEverythingAndStartsAgainFromZero() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 16 * Self.MiB, seed: 32)
            f.origin.put("/refuse.bin", body)
            var slow = TestOrigin.Behavior()
            slow.bytesPerSecond = 4 * Self.MiB
            slow.refuseRangeTimes = 1
            f.origin.setBehavior("/refuse.bin", slow)
            let partial = f.dir.path("refuse.partial")
            let (first, observer) = await f.run("/refuse.bin", partial: partial, maxConnections: 4)
            let failure = try #require(first.failure)
            #expect(failure.isTransient && failure.durable.isEmpty, "\(failure)")
            #expect(failure.error.message.contains("changed during the download"), "\(failure.error.message)")
            #expect(PartialFile.length(path: partial) == 0)
            #expect(observer.snapshot.checkpoints.last?.ranges.isEmpty == true)
            #expect(f.origin.requests("/refuse.bin").contains { $0.status == 416 })

            f.origin.setBehavior("/refuse.bin", TestOrigin.Behavior())
            let (second, _) = await f.run("/refuse.bin", partial: partial, maxConnections: 4)
            guard case .completed = second else {
                Issue.record("\(second)")
                return
            }
            #expect(try readFile(partial) == body)
        }
    }

    /// A further request answered with another range of the same version (a server that cannot be split):
    /// nothing of it is written, the first request goes on through the whole file, in the same attempt.
    @Test func aWrongContentRangeFallsBackToOneRequest() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 16 * Self.MiB, seed: 33)
            f.origin.put("/wrong.bin", body)
            var slow = TestOrigin.Behavior()
            slow.bytesPerSecond = 4 * Self.MiB
            slow.wrongContentRange = true
            f.origin.setBehavior("/wrong.bin", slow)
            let partial = f.dir.path("wrong.partial")
            let (outcome, observer) = await f.run("/wrong.bin", partial: partial, maxConnections: 4)
            guard case .completed = outcome else {
                Issue.record("\(outcome)")
                return
            }
            let written = try readFile(partial)
            #expect(written == body)
            let requests = f.origin.requests("/wrong.bin")
            #expect(requests.count >= 2 && requests.dropFirst().allSatisfy { $0.range != nil })
            #expect(f.origin.bytesServed("/wrong.bin") >= Int64(body.count), "the first request sent everything")
            observer.expectSaneCheckpoints()
        }
    }

    /// Stopped while split: the durable ranges (with gaps) are the outcome; the next attempt fetches just the
    /// gaps, each from its start with If-Range, and the file is whole.
    @Test func stoppedWhileSplitResumesEveryGap() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 24 * Self.MiB, seed: 34)
            f.origin.put("/stop.bin", body)
            var slow = TestOrigin.Behavior()
            slow.bytesPerSecond = 4 * Self.MiB
            f.origin.setBehavior("/stop.bin", slow)
            let partial = f.dir.path("stop.partial")
            let observer = RecordingObserver(partialPath: partial)
            var request = AttemptRequest.download(taskID: 2, url: f.origin.url("/stop.bin"), partialPath: partial,
                                                  checkpointInterval: 0.2)
            if case .partialFile(var target) = request.sink {
                target.maxConnections = 4
                request.sink = .partialFile(target)
            }
            let attempt = f.transfer(request, observer: observer)
            let running = Task { await attempt.run() }
            try await waitUntil("three requests") { f.origin.requests("/stop.bin").count >= 3 }
            try await waitUntil("ranges with gaps durable") {
                observer.snapshot.checkpoints.last.map { !$0.ranges.isPrefix && $0.ranges.count > 2 * Int64(Self.MiB) } ?? false
            }
            attempt.stop()
            let outcome = await running.value
            guard case .stopped(let durable) = outcome else {
                Issue.record("\(outcome)")
                return
            }
            #expect(!durable.isPrefix, "\(durable)")
            #expect(observer.snapshot.checkpoints.last?.ranges == durable)
            let validators = try #require(observer.snapshot.starts.first?.validators)
            let before = f.origin.requests("/stop.bin").count

            f.origin.setBehavior("/stop.bin", TestOrigin.Behavior())
            let (second, _) = await f.run("/stop.bin", partial: partial, durable: durable, validators: validators)
            guard case .completed = second else {
                Issue.record("\(second)")
                return
            }
            #expect(try readFile(partial) == body)
            let resumed = f.origin.requests("/stop.bin").dropFirst(before)
            let gaps = durable.gaps(total: Int64(body.count))
            #expect(resumed.compactMap(\.rangeStart).sorted() == gaps.map(\.lowerBound), "\(resumed.map(\.range)) for \(gaps)")
            #expect(resumed.allSatisfy { $0.ifRange == validators.ifRangeValue && $0.status == 206 })
        }
    }
}
