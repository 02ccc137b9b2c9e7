// DownloadMachine in virtual time: what a download attempt does with its requests' ends, ticks and sheds (no I/O).
@testable import HalfTunesCore
@testable import HalfTunesEngine
import HalfTunesProtocol
import Testing

@Suite struct DownloadMachineTests {
    static let MiB: Int64 = 1 << 20
    static let url = "http://127.0.0.1/file"
    static let v1 = Validators(etag: "\"v1\"", lastModified: nil)

    static func start(offset: Int64 = 0, total: Int64? = 64 * MiB, status: Int = 200,
                      validators: Validators = v1) -> ResponseStart {
        ResponseStart(status: status, offset: offset, discardedBytes: 0, reason: nil, expectedTotal: total,
                      validators: validators, finalURL: url)
    }

    static func end(position: Int64, reachedLimit: Bool = false, responseEnded: Bool = false,
                    decided: PartialFileSink.Decided? = nil, failure: TaskError? = nil,
                    start: ResponseStart? = nil) -> DownloadMachine.RequestEnd {
        DownloadMachine.RequestEnd(decided: decided, start: start, expectedEnd: nil, timedOut: false, finalURL: url,
                                   position: position, reachedLimit: reachedLimit, responseEnded: responseEnded,
                                   transportFailure: failure.map { .init(error: $0, isTransient: true) })
    }

    static let lost = TaskError(code: TaskErrorCode.connectionLost, message: "lost")

    /// A machine whose first request answered with `total` bytes that may be split into `connections`,
    /// ticked past its warm-up with as many connections granted as it wants: returns it and its opens.
    static func split(connections: Int = 4, total: Int64 = 64 * MiB) -> (DownloadMachine, [DownloadMachine.Action]) {
        var machine = DownloadMachine(settings: .init(maxConnections: connections), kept: ByteRanges())
        #expect(machine.handle(.launched) == [.startCheckpoints])
        #expect(machine.handle(.responseStarted(start(total: total), acceptsRanges: true, now: 0)) == [.startPlanning])
        let positions = [0: 8 * MiB]
        let wanted = machine.connectionsWanted(now: 1, positions: positions, ceiling: nil, stopRequested: false)
        let actions = machine.handle(.tick(now: 1, positions: positions, ceiling: nil, granted: wanted,
                                           stopRequested: false))
        return (machine, actions)
    }

    static func opened(_ actions: [DownloadMachine.Action]) -> [Int] {
        actions.compactMap { if case let .open(id, _, _, _, _) = $0 { id } else { nil } }
    }

    @Test func aResponseWithoutRangesIsOneRequestThatEndsAsItDid() {
        var machine = DownloadMachine(settings: .init(maxConnections: 4), kept: ByteRanges())
        _ = machine.handle(.launched)
        #expect(machine.handle(.responseStarted(Self.start(), acceptsRanges: false, now: 0)).isEmpty)
        #expect(machine.connectionsWanted(now: 5, positions: [0: 1], ceiling: nil, stopRequested: false) == 0)
        let end = Self.end(position: 64 * Self.MiB, responseEnded: true, start: Self.start())
        #expect(machine.handle(.ended(id: 0, end, stopRequested: false)) == [.finish(.single(end))])
        #expect(machine.finishing)
    }

    /// Progress in virtual time: counted from what the file kept when the response appends (from 0 when it does
    /// not), at most one report a second, a trailing one after a stall, the rest just before the end, and nothing
    /// once the attempt ends; totals never above the length the response gave.
    @Test func progressIsPacedTrailsAStallAndIsWholeBeforeTheEnd() {
        let kept = ByteRanges(prefix: 10 * Self.MiB)
        var machine = DownloadMachine(settings: .init(maxConnections: 1, progressInterval: 1), kept: kept)
        _ = machine.handle(.launched)
        let resumed = Self.start(offset: 10 * Self.MiB, total: 12 * Self.MiB, status: 206)
        _ = machine.handle(.responseStarted(resumed, acceptsRanges: true, now: 100))
        #expect(machine.handle(.received(bytes: 0, now: 100.1)).isEmpty)
        // Within the interval: one trailing report is scheduled, once.
        #expect(machine.handle(.received(bytes: 1000, now: 100.2)) == [.scheduleProgress(at: 101)])
        #expect(machine.handle(.received(bytes: 1000, now: 100.5)).isEmpty)
        // The interval passed: everything since the response started, from the kept 10 MiB.
        #expect(machine.handle(.received(bytes: 48, now: 101)) ==
                [.progress(delta: 2048, total: 10 * Self.MiB + 2048, expected: 12 * Self.MiB)])
        // The timer fires with nothing behind: nothing.
        #expect(machine.handle(.progressDue(now: 101)).isEmpty)
        // A stall: the bytes before it are reported by the timer, not left behind.
        #expect(machine.handle(.received(bytes: 100, now: 101.5)) == [.scheduleProgress(at: 102)])
        #expect(machine.handle(.progressDue(now: 101.9)) == [.scheduleProgress(at: 102)], "early: again")
        #expect(machine.handle(.progressDue(now: 102)) ==
                [.progress(delta: 100, total: 10 * Self.MiB + 2148, expected: 12 * Self.MiB)])
        // A server sending more than it said is reported up to the length it said; the rest goes before the end.
        _ = machine.handle(.received(bytes: 3 * Self.MiB, now: 102.2))
        let end = Self.end(position: 13 * Self.MiB, responseEnded: true, start: resumed)
        #expect(machine.handle(.ended(id: 0, end, stopRequested: false)) ==
                [.progress(delta: 3 * Self.MiB, total: 12 * Self.MiB, expected: 12 * Self.MiB), .finish(.single(end))])
        #expect(machine.handle(.received(bytes: 5, now: 103)).isEmpty)
        #expect(machine.handle(.progressDue(now: 103)).isEmpty)

        // A response from byte 0 counts from 0, whatever was kept.
        var fresh = DownloadMachine(settings: .init(maxConnections: 1, progressInterval: 1), kept: kept)
        _ = fresh.handle(.responseStarted(Self.start(total: nil), acceptsRanges: false, now: 5))
        #expect(fresh.handle(.received(bytes: 7, now: 6)) == [.progress(delta: 7, total: 7, expected: nil)])
    }

    @Test func aWeakValidatorOrOneConnectionKeepsTheDownloadWhole() {
        var weak = DownloadMachine(settings: .init(maxConnections: 4), kept: ByteRanges())
        let weakStart = Self.start(validators: Validators(etag: "W/\"v1\"", lastModified: nil))
        #expect(weak.handle(.responseStarted(weakStart, acceptsRanges: true, now: 0)).isEmpty)
        var single = DownloadMachine(settings: .init(maxConnections: 1), kept: ByteRanges())
        #expect(single.handle(.responseStarted(Self.start(), acceptsRanges: true, now: 0)).isEmpty)
    }

    @Test func gapsLeftByAnEarlierAttemptLimitTheFirstRequestEvenWithOneConnection() {
        let kept = ByteRanges([0..<(8 * Self.MiB), (32 * Self.MiB)..<(40 * Self.MiB)])
        var machine = DownloadMachine(settings: .init(maxConnections: 1), kept: kept)
        let actions = machine.handle(.responseStarted(Self.start(offset: 8 * Self.MiB, status: 206),
                                                      acceptsRanges: false, now: 0))
        #expect(actions == [.startPlanning, .limitPrimary(32 * Self.MiB)])
    }

    @Test func theConnectionsGrantedAreTheOnesOpenedAndAnUnusedGrantIsReleased() {
        let (machine, actions) = Self.split()
        #expect(Self.opened(actions) == [1])
        #expect(machine.extrasHeld == 1)
        for case let .open(_, range, url, validators, total) in actions {
            #expect(url == Self.url && validators == Self.v1 && total == 64 * Self.MiB)
            #expect(range.upperBound == 64 * Self.MiB)
        }
        // Granted more than the planner used: the rest goes back at once.
        var (more, _) = Self.split()
        let positions = [0: 9 * Self.MiB, 1: 40 * Self.MiB]
        let tick = more.handle(.tick(now: 1.05, positions: positions, ceiling: nil, granted: 3, stopRequested: false))
        #expect(Self.opened(tick).isEmpty)
        #expect(tick.last == .releaseConnections(3))
        #expect(more.extrasHeld == 1)
    }

    @Test func aRefusedGrantOpensNothingAndTheDownloadGoesOnAlone() {
        var machine = DownloadMachine(settings: .init(maxConnections: 4), kept: ByteRanges())
        _ = machine.handle(.launched)
        _ = machine.handle(.responseStarted(Self.start(), acceptsRanges: true, now: 0))
        #expect(machine.connectionsWanted(now: 1, positions: [0: Self.MiB], ceiling: nil, stopRequested: false) == 1)
        let actions = machine.handle(.tick(now: 1, positions: [0: Self.MiB], ceiling: nil, granted: 0,
                                           stopRequested: false))
        #expect(actions.isEmpty)
        #expect(machine.running == [0])
    }

    @Test func anEndedSegmentGivesBackItsConnectionAndAsksToPlanAgain() {
        var (machine, actions) = Self.split()
        guard case let .open(id, range, _, _, _)? = actions.first(where: { if case .open = $0 { true } else { false } })
        else { Issue.record("no segment opened"); return }
        let ended = machine.handle(.ended(id: id, Self.end(position: range.upperBound, reachedLimit: true),
                                          stopRequested: false))
        #expect(ended == [.releaseConnections(1), .plan])
        #expect(machine.extrasHeld == 0)
    }

    @Test func aRefusedSegmentTellsTheObserverWithTheServersRetryAfter() {
        var (machine, _) = Self.split()
        let error = TaskError(code: TaskErrorCode.serverBusy, message: "503")
        let refused = Self.end(position: 0, decided: .segment(.refused(error, retryAfter: 7)))
        let actions = machine.handle(.ended(id: 1, refused, stopRequested: false))
        #expect(actions.contains(.connectionRefused(retryAfter: 7)))
        #expect(actions.contains(.releaseConnections(1)))
    }

    @Test func anotherVersionStopsEveryRequestAndStartsAgainFromZeroOnce() {
        var (machine, _) = Self.split()
        let changed = Self.end(position: 0, decided: .segment(.changed(reason: "ETag \"v2\"")))
        let first = machine.handle(.ended(id: 1, changed, stopRequested: false))
        // Segment 1 got nothing: its range goes back to the first request, which is stopped with the rest.
        #expect(first == [.releaseConnections(1), .extend(id: 0, limit: 64 * Self.MiB), .cancel([0])])
        let primaryEnd = Self.end(position: 8 * Self.MiB, failure: Self.lost)
        #expect(machine.handle(.ended(id: 0, primaryEnd, stopRequested: false)) == [.restartFromZero(url: Self.url)], "the one request asks where the first response came from")
        #expect(machine.running == [0] && machine.planner == nil && machine.restarted)
        // The one request from byte 0 answers with another version again: the attempt ends, the file goes.
        let again = Self.end(position: 0, decided: .changed(reason: "ETag \"v3\""))
        #expect(machine.handle(.ended(id: 0, again, stopRequested: false))
            == [.finish(.changed(reason: "ETag \"v3\"", url: ""))])
    }

    @Test func anotherVersionWhileStoppingDoesNotStartAgain() {
        var (machine, _) = Self.split()
        let changed = Self.end(position: 0, decided: .segment(.changed(reason: "416")))
        _ = machine.handle(.ended(id: 1, changed, stopRequested: true))
        let actions = machine.handle(.ended(id: 0, Self.end(position: 9 * Self.MiB), stopRequested: true))
        #expect(actions == [.finish(.changed(reason: "416", url: Self.url))])
    }

    @Test func aShedStopsTheNewestFurtherRequestsAndNeverTheLastOne() {
        var (machine, actions) = Self.split(connections: 8)
        guard case let .open(_, range, _, _, _)? = actions.first(where: { if case .open = $0 { true } else { false } })
        else { Issue.record("no split: \(actions)"); return }
        // Both requests brought 6 MiB in half a second: the rate grew, so the planner doubles the connections.
        let positions = [0: 14 * Self.MiB, 1: range.lowerBound + 6 * Self.MiB]
        let wanted = machine.connectionsWanted(now: 1.5, positions: positions, ceiling: nil, stopRequested: false)
        _ = machine.handle(.tick(now: 1.5, positions: positions, ceiling: nil, granted: wanted, stopRequested: false))
        let running = machine.running.sorted()
        #expect(running.count == 4)
        #expect(machine.handle(.shed(count: 1)) == [.stopKeepingData([running.last!])])
        #expect(machine.handle(.shed(count: 99)) == [.stopKeepingData(Array(running.dropFirst().dropLast().reversed()))])
        #expect(machine.handle(.shed(count: 1)).isEmpty)
        // A shed request's end is not held against the server: the planner is asked again.
        let shedEnd = Self.end(position: 40 * Self.MiB, failure: Self.lost)
        #expect(machine.handle(.ended(id: running.last!, shedEnd, stopRequested: false)).last == .plan)
    }

    @Test func aFileErrorCancelsEveryRequestAndOpensNothingMore() {
        var (machine, _) = Self.split()
        #expect(machine.handle(.fileFailed) == [.cancel([0, 1])])
        #expect(machine.connectionsWanted(now: 9, positions: [:], ceiling: nil, stopRequested: false) == 0)
        _ = machine.handle(.ended(id: 1, Self.end(position: 0), stopRequested: false))
        let actions = machine.handle(.ended(id: 0, Self.end(position: 9 * Self.MiB), stopRequested: false))
        guard case .finish(.segmented(let total, _, _, _))? = actions.last else {
            Issue.record("no finish: \(actions)")
            return
        }
        #expect(total == 64 * Self.MiB)
    }

    @Test func theLastRequestEndingShortEndsTheAttemptRatherThanAskingAgain() {
        var (machine, _) = Self.split()
        _ = machine.handle(.ended(id: 1, Self.end(position: 0, failure: Self.lost), stopRequested: false))
        let actions = machine.handle(.ended(id: 0, Self.end(position: 9 * Self.MiB, failure: Self.lost),
                                            stopRequested: false))
        guard case .finish(.segmented(_, _, let lastFailure, false))? = actions.last else {
            Issue.record("no finish: \(actions)")
            return
        }
        #expect(lastFailure?.error == Self.lost)
    }

    @Test func anUnsplittableAnswerKeepsOnlyThePartFromByteZero() {
        var (machine, _) = Self.split()
        let unsplittable = Self.end(position: 0, decided: .segment(.unsplittable(reason: "200")))
        _ = machine.handle(.ended(id: 1, unsplittable, stopRequested: false))
        let actions = machine.handle(.ended(id: 0, Self.end(position: 9 * Self.MiB, failure: Self.lost),
                                            stopRequested: false))
        guard case .finish(let finish)? = actions.last, case .segmented(_, _, _, true) = finish else {
            Issue.record("no finish keeping the prefix only: \(actions)")
            return
        }
        let snapshot = PartialWriter.Snapshot(
            writtenRanges: ByteRanges([0..<(9 * Self.MiB), (40 * Self.MiB)..<(41 * Self.MiB)]),
            durableRanges: ByteRanges([0..<(9 * Self.MiB), (40 * Self.MiB)..<(41 * Self.MiB)]), error: nil)
        let (outcome, checkpoint) = PartialFileOutcome.conclude(finish, stopRequested: false, snapshot: snapshot)
        #expect(checkpoint == ByteRanges(prefix: 9 * Self.MiB))
        guard case .failed(let failure, _) = outcome else {
            Issue.record("not failed: \(outcome)")
            return
        }
        #expect(failure.durable == ByteRanges(prefix: 9 * Self.MiB))
    }

    @Test func aCompleteSplitDownloadIsNotCheckpointedAgain() {
        let finish = DownloadMachine.Finish.segmented(total: 10, start: Self.start(total: 10), lastFailure: nil,
                                                      keepPrefixOnly: false)
        let all = ByteRanges(prefix: 10)
        let (outcome, checkpoint) = PartialFileOutcome.conclude(
            finish, stopRequested: false, snapshot: .init(writtenRanges: all, durableRanges: all, error: nil))
        #expect(outcome == .completed(totalBytes: 10, validators: Self.v1))
        #expect(checkpoint == nil)
    }

    @Test func anAttemptAbandonedBeforeItsRequestEndsOnceWithItsError() {
        var machine = DownloadMachine(settings: .init(maxConnections: 4), kept: ByteRanges())
        let error = TaskError(code: TaskErrorCode.ioError, message: "gone")
        #expect(machine.handle(.abandoned(id: 0, error)) == [.finish(.nothing(error))])
        #expect(machine.handle(.abandoned(id: 0, nil)).isEmpty)
        #expect(machine.handle(.launched).isEmpty)
    }

    @Test func oneCheckpointAtATimeAndOnlyWhenSomethingWasWritten() {
        var (machine, _) = Self.split()
        #expect(machine.handle(.checkpointDue) == [.flushForCheckpoint])
        #expect(machine.handle(.flushed).isEmpty, "nothing was written: no fsync")
        #expect(machine.handle(.wrote).isEmpty)
        #expect(machine.handle(.checkpointDue) == [.flushForCheckpoint])
        #expect(machine.handle(.flushed) == [.sync])
        // While the fsync runs, the timer asks for nothing; written bytes wait for the next checkpoint.
        _ = machine.handle(.wrote)
        #expect(machine.handle(.checkpointDue).isEmpty)
        #expect(machine.handle(.synced).isEmpty)
        #expect(machine.handle(.checkpointDue) == [.flushForCheckpoint])
        #expect(machine.handle(.flushed) == [.sync])
        // Once the attempt ends, its end makes the last checkpoint.
        _ = machine.handle(.synced)
        _ = machine.handle(.wrote)
        _ = machine.handle(.fileFailed)
        _ = machine.handle(.ended(id: 1, Self.end(position: 0), stopRequested: false))
        _ = machine.handle(.ended(id: 0, Self.end(position: 9 * Self.MiB), stopRequested: false))
        #expect(machine.finishing)
        #expect(machine.handle(.checkpointDue).isEmpty && machine.handle(.flushed).isEmpty)
    }
}
