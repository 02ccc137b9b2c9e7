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
            #expect(requests.count >= 2, "\(requests.map(\.range))")
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

    /// A 416 to a further request means another version: every request stops, the file is emptied, and one
    /// request starts again from byte 0 in the same attempt (`discardedBytes`, reason `resourceChanged`).
    @Test func aRefusedRangeStopsEverythingAndStartsAgainFromZero() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 16 * Self.MiB, seed: 32)
            f.origin.put("/refuse.bin", body)
            var slow = TestOrigin.Behavior()
            slow.bytesPerSecond = 4 * Self.MiB
            slow.refuseRangeTimes = 1
            f.origin.setBehavior("/refuse.bin", slow)
            let partial = f.dir.path("refuse.partial")
            let (outcome, observer) = await f.run("/refuse.bin", partial: partial, maxConnections: 4)
            guard case .completed = outcome else {
                Issue.record("\(outcome)")
                return
            }
            let written = try readFile(partial)
            #expect(written == body)
            let starts = observer.snapshot.starts
            #expect(starts.count == 2, "\(starts)")
            #expect(starts.last?.offset == 0 && starts.last?.reason == "resourceChanged" && (starts.last?.discardedBytes ?? 0) > 0)
            #expect(observer.snapshot.checkpoints.contains { $0.ranges.isEmpty }, "the emptied file was journaled")
            let requests = f.origin.requests("/refuse.bin")
            #expect(requests.contains { $0.status == 416 })
            #expect(requests.last?.range == nil || requests.last?.ifRange != nil)
            observer.expectSaneCheckpoints()
        }
    }

    /// The file changes on the origin while the download is split: whatever the timing, the result is one
    /// version, never a mix; when a further request saw the new one, the download started again and has it.
    @Test func aFileChangedWhileSplitIsNeverMixed() async throws {
        try await EngineFixture.with { f in
            let v1 = TestOrigin.randomBytes(count: 24 * Self.MiB, seed: 35)
            let v2 = TestOrigin.randomBytes(count: 24 * Self.MiB, seed: 36)
            f.origin.put("/change.bin", v1)
            var slow = TestOrigin.Behavior()
            slow.bytesPerSecond = 4 * Self.MiB
            f.origin.setBehavior("/change.bin", slow)
            let partial = f.dir.path("change.partial")
            let observer = RecordingObserver(partialPath: partial)
            let request = AttemptRequest.download(taskID: 3, url: f.origin.url("/change.bin"), partialPath: partial,
                                                  durable: ByteRanges(), maxConnections: 4)
            let attempt = f.transfer(request, observer: observer)
            let running = Task { await attempt.run() }
            try await f.origin.waitForRequests("/change.bin", count: 2)
            f.origin.change("/change.bin", to: v2)
            f.origin.setBehavior("/change.bin", TestOrigin.Behavior())
            let outcome = await running.value
            guard case .completed = outcome else {
                Issue.record("\(outcome)")
                return
            }
            let written = try readFile(partial)
            let sawNew = f.origin.requests("/change.bin").dropFirst(2).contains { $0.status == 200 }
            #expect(written == (sawNew ? v2 : v1), "sawNew: \(sawNew)")
            if sawNew { #expect(observer.snapshot.starts.last?.reason == "resourceChanged") }
        }
    }

    /// 503 with Retry-After to every further request: nothing fails; the first request takes back the range
    /// it gave away and finishes the file alone, in the same attempt.
    @Test func busyAnswersToFurtherRequestsLeaveOneConnection() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 16 * Self.MiB, seed: 37)
            f.origin.put("/busy.bin", body)
            var b = TestOrigin.Behavior()
            b.bytesPerSecond = 4 * Self.MiB
            b.faultsFromRequest = 1
            b.failStatus = 503
            b.failTimes = .max
            b.retryAfter = "30"
            f.origin.setBehavior("/busy.bin", b)
            let partial = f.dir.path("busy.partial")
            let (outcome, observer) = await f.run("/busy.bin", partial: partial, maxConnections: 4)
            guard case .completed = outcome else {
                Issue.record("\(outcome)")
                return
            }
            let written = try readFile(partial)
            #expect(written == body)
            let requests = f.origin.requests("/busy.bin")
            #expect(requests.count == 2 && requests.last?.status == 503, "one refusal lowers the cap to one")
            #expect(observer.snapshot.serverRefusals == [30], "the observer hears of it, with Retry-After")
        }
    }

    /// A further request that drops mid-range, and one that stalls past the idle timeout: their ranges go
    /// back to the planner and the file is whole, in the same attempt.
    @Test func aDroppedOrStalledSegmentIsFetchedAgain() async throws {
        for stall in [false, true] {
            try await EngineFixture.with { f in
                let body = TestOrigin.randomBytes(count: 16 * Self.MiB, seed: 38)
                f.origin.put("/drop.bin", body)
                var b = TestOrigin.Behavior()
                b.bytesPerSecond = 4 * Self.MiB
                b.faultsFromRequest = 1
                if stall {
                    b.stallAfterBytes = Int64(Self.MiB)
                    b.stallTimes = 1
                } else {
                    b.dropAfterBytes = Int64(Self.MiB)
                    b.dropTimes = 1
                }
                f.origin.setBehavior("/drop.bin", b)
                let partial = f.dir.path("drop.partial")
                let (outcome, observer) = await f.run("/drop.bin", partial: partial, timeout: 1, maxConnections: 4)
                guard case .completed = outcome else {
                    Issue.record("stall \(stall): \(outcome)")
                    return
                }
                let written = try readFile(partial)
                #expect(written == body, "stall \(stall)")
                let requests = f.origin.requests("/drop.bin")
                #expect(requests.count >= 3, "stall \(stall): \(requests.map(\.range))")
                observer.expectSaneCheckpoints()
            }
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
            let request = AttemptRequest.download(taskID: 2, url: f.origin.url("/stop.bin"), partialPath: partial,
                                                  durable: ByteRanges(), checkpointInterval: 0.2, maxConnections: 4)
            let attempt = f.transfer(request, observer: observer)
            let running = Task { await attempt.run() }
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
            #expect(observer.snapshot.writes.last?.total == durable.count, "every byte reported is durable once stopped")
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

    /// Extra connections are asked for one at a time: with one granted, never more than two requests run
    /// at once, every grant is given back by the end, and the file is whole.
    @Test func extraConnectionsAreGrantedOneAtATimeAndGivenBack() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 24 * Self.MiB, seed: 35)
            f.origin.put("/grant.bin", body)
            var slow = TestOrigin.Behavior()
            slow.bytesPerSecond = 4 * Self.MiB
            f.origin.setBehavior("/grant.bin", slow)
            let partial = f.dir.path("grant.partial")
            let (outcome, observer) = await f.run("/grant.bin", partial: partial, maxConnections: 8, allowance: 1)
            guard case .completed = outcome else {
                Issue.record("\(outcome)")
                return
            }
            let written = try readFile(partial)
            #expect(written == body)
            let s = observer.snapshot
            #expect(s.maxHeld == 1 && s.granted >= 1 && s.refused >= 1, "granted \(s.granted), refused \(s.refused)")
            #expect(s.held == 0, "every grant given back")
            #expect(f.origin.requests("/grant.bin").count >= 2)
        }
    }

    /// Connections taken back while split (`shedConnections`): the newest requests stop, what they wrote
    /// stays, the rest is fetched by the connection left, and nothing is asked again while none is granted.
    /// The further requests stall after 256 KiB, so only the shedding can end them (their idle timeout is
    /// 60 s): the test does not depend on timing.
    @Test func shedConnectionsStopTheNewestRequestsAndTheDownloadGoesOn() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 32 * Self.MiB, seed: 36)
            f.origin.put("/shed.bin", body)
            var stalling = TestOrigin.Behavior()
            stalling.bytesPerSecond = 4 * Self.MiB
            stalling.faultsFromRequest = 1
            stalling.stallAfterBytes = 256 * 1024
            f.origin.setBehavior("/shed.bin", stalling)
            let partial = f.dir.path("shed.partial")
            let observer = RecordingObserver(partialPath: partial)
            observer.setAllowance(3)
            let request = AttemptRequest.download(taskID: 3, url: f.origin.url("/shed.bin"), partialPath: partial,
                                                  durable: ByteRanges(), checkpointInterval: 0.2, maxConnections: 4)
            let attempt = f.transfer(request, observer: observer)
            let running = Task { await attempt.run() }
            try await waitUntil("an extra connection") { observer.snapshot.held >= 1 }
            observer.setAllowance(0)
            let held = observer.snapshot.held
            attempt.shedConnections(held)
            try await waitUntil("the stalled extras given back") { observer.snapshot.held == 0 }
            let requestsAfterShed = f.origin.requests("/shed.bin").count
            f.origin.setBehavior("/shed.bin", TestOrigin.Behavior())
            let outcome = await running.value
            guard case .completed = outcome else {
                Issue.record("\(outcome)")
                return
            }
            let written = try readFile(partial)
            #expect(written == body)
            let s = observer.snapshot
            #expect(s.granted == held && s.held == 0, "granted \(s.granted), \(held) shed")
            // One connection fetches what the shed ones left, one range after another (no request refused).
            let later = f.origin.requests("/shed.bin").dropFirst(requestsAfterShed)
            #expect(later.allSatisfy { $0.status == 206 }, "\(later.map(\.status))")
            observer.expectSaneCheckpoints()
        }
    }
}
