// RequestMachine with no I/O: one request's response decision, limits, batches, backpressure and write failures.
@testable import HalfTunesCore
@testable import HalfTunesEngine
import HalfTunesProtocol
import Testing

@Suite struct RequestMachineTests {
    static let MiB = 1 << 20
    static let batch = RequestMachine.batchSize
    static let v1 = Validators(etag: "\"v1\"", lastModified: nil)
    static let url = "http://127.0.0.1/file"

    static func segment(_ range: Range<Int64>, total: Int64 = 64 << 20) -> RequestMachine {
        RequestMachine(role: .segment(range: range, total: total, validators: v1))
    }

    /// A further request whose 206 was taken.
    static func streaming(_ range: Range<Int64>) -> RequestMachine {
        var machine = segment(range)
        _ = machine.head(status: 206, headers: partial(range), finalURL: url, now: 0, keptCount: 0)
        return machine
    }

    static func primary(offset: Int64 = 0, kept: Int64 = 0, validators: Validators? = nil) -> RequestMachine {
        RequestMachine(role: .primary(.init(requestedOffset: offset, kept: kept,
                                            sentIfRange: offset > 0 ? validators?.ifRangeValue : nil,
                                            requestValidators: validators, expectedLength: nil, restartReason: nil)))
    }

    static func partial(_ range: Range<Int64>, total: Int64 = 64 << 20, etag: String = "\"v1\"") -> [(String, String)] {
        [("Content-Range", "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(total)"), ("ETag", etag),
         ("Content-Length", "\(range.count)")]
    }

    static func submits(_ actions: [RequestMachine.Action]) -> [Int64] {
        actions.compactMap { if case .submit(let at) = $0 { at } else { nil } }
    }

    @Test func aSegmentWritesOnlyItsExactRangeOfTheSameVersion() {
        let range: Range<Int64> = 8_388_608..<16_777_216
        var other = Self.segment(range)
        let changed = other.head(status: 206, headers: Self.partial(range, etag: "\"v2\""), finalURL: Self.url, now: 0,
                                 keptCount: 0)
        #expect(!changed.accepted && other.phase == .ignoringBody)
        guard case .segment(.changed)? = other.decided else { Issue.record("\(String(describing: other.decided))"); return }
        #expect(other.body(1000).isEmpty)

        var machine = Self.segment(range)
        let head = machine.head(status: 206, headers: Self.partial(range), finalURL: Self.url, now: 0, keptCount: 0)
        #expect(head.accepted && head.actions.isEmpty && machine.position == range.lowerBound)
    }

    @Test func bytesAreBatchedAndAFullBatchWaitsForTheWriteInFlight() {
        let range: Range<Int64> = 0..<(8 << 20)
        var machine = Self.streaming(range)
        #expect(machine.body(Self.batch - 1) == [.append(Self.batch - 1)])
        #expect(machine.body(1) == [.append(1), .submit(at: 0)])
        #expect(machine.writesInFlight == 1)
        #expect(machine.body(Self.batch) == [.append(Self.batch), .holdBack])
        #expect(machine.isHoldingBack)
        // The write ends: the next batch goes, and the response goes on.
        #expect(machine.writeDone(ok: true) == [.submit(at: Int64(Self.batch)), .release])
        #expect(machine.writeDone(ok: true).isEmpty)
        #expect(!machine.isHoldingBack && machine.position == Int64(2 * Self.batch))
    }

    @Test func aRequestStopsAtItsLimitUnlessTheResponseEndsThere() {
        let range: Range<Int64> = 0..<1000
        var machine = Self.streaming(range)
        // The response ends at the range's end: nothing to stop.
        #expect(machine.body(1500) == [.append(1000), .submit(at: 0)])
        #expect(machine.reachedLimit && machine.phase == .ignoringBody)

        var first = Self.primary()
        _ = first.head(status: 200, headers: [("Content-Length", "5000"), ("ETag", "\"v1\"")], finalURL: Self.url,
                       now: 0, keptCount: 0)
        first.limitFirstRequest(3000)
        #expect(first.body(2000) == [.append(2000)])
        #expect(first.body(2000) == [.append(1000), .submit(at: 0), .stop(.segmentDone)])
    }

    @Test func thePlannerCutsAndExtendsARequest() {
        var machine = Self.primary()
        _ = machine.head(status: 200, headers: [("Content-Length", "5000"), ("ETag", "\"v1\"")], finalURL: Self.url,
                         now: 0, keptCount: 0)
        _ = machine.body(100)
        #expect(machine.setLimit(4000).isEmpty) // not there yet
        machine.extendLimit(to: 4500)
        #expect(machine.limit == 4500)
        #expect(machine.setLimit(80) == [.submit(at: 0), .stop(.segmentDone)])
        #expect(machine.setLimit(50).isEmpty)
    }

    @Test func aCancelDropsWhatWasGatheredAndLetsTheResponseGo() {
        let range: Range<Int64> = 0..<(8 << 20)
        var machine = Self.streaming(range)
        _ = machine.body(Self.batch)
        _ = machine.body(Self.batch)
        #expect(machine.cancel() == [.dropPending, .release, .stop(.decided)])
        #expect(machine.cancelled && machine.pendingBytes == 0)
        #expect(machine.finish().isEmpty)
        #expect(machine.cancel().isEmpty)
    }

    @Test func aShedRequestWritesWhatItHasAtOnce() {
        let range: Range<Int64> = 0..<(8 << 20)
        var machine = Self.streaming(range)
        _ = machine.body(Self.batch)
        _ = machine.body(Self.batch)
        // Forced: a second write while the first is in flight.
        #expect(machine.stopKeepingData() == [.submit(at: Int64(Self.batch)), .release, .stop(.segmentDone)])
        #expect(machine.writesInFlight == 2)
    }

    @Test func aCheckpointFlushesNowOrAfterTheWriteInFlight() {
        let range: Range<Int64> = 0..<(8 << 20)
        var machine = Self.streaming(range)
        _ = machine.body(100)
        #expect(machine.flushForCheckpoint() == [.submit(at: 0)])
        _ = machine.body(200)
        #expect(machine.flushForCheckpoint().isEmpty) // requested: after the write in flight
        #expect(machine.writeDone(ok: true) == [.submit(at: 100)])
    }

    @Test func aFailedWriteStopsTheRequestAndTellsTheDownloadEvenAfterItsEnd() {
        let range: Range<Int64> = 0..<(8 << 20)
        var machine = Self.streaming(range)
        _ = machine.body(Self.batch)
        _ = machine.body(Self.batch)
        #expect(machine.writeDone(ok: false) == [.release, .stop(.writeFailed), .fileFailed])
        #expect(machine.phase == .ignoringBody)
        var ended = Self.streaming(range)
        _ = ended.body(10)
        #expect(ended.finish() == [.submit(at: 0)])
        #expect(ended.writeDone(ok: false) == [.fileFailed])
    }

    /// Issue 54: a resume answered 206 with the right Content-Range and `Content-Length: 9223372036854775807`
    /// trapped in `offset + length` (and again at every restart). Lengths past 2^62 are refused as an invalid
    /// response, not transient, before any sum; so are such numbers in Content-Range, whose `end + 1` trapped.
    @Test(arguments: [
        [("Content-Range", "bytes 1000-4999/5000"), ("Content-Length", "9223372036854775807")],
        [("Content-Range", "bytes 1000-9223372036854775807/*")],
        [("Content-Range", "bytes 1000-4999/9223372036854775807")],
        [("Content-Range", "bytes 1000-4999/5000"), ("Content-Length", "99999999999999999999999")],
        [("Content-Range", "bytes 1000-4611686018427387905/*")],
    ])
    func aLengthPast2To62IsAnInvalidResponseNotATrap(headers: [(String, String)]) {
        var machine = Self.primary(offset: 1000, kept: 1000, validators: Self.v1)
        let head = machine.head(status: 206, headers: headers + [("ETag", "\"v1\"")], finalURL: Self.url, now: 0,
                                keptCount: 1000)
        #expect(!head.accepted && head.actions.isEmpty)
        guard case .fail(let error, let transient, _)? = machine.decided else {
            Issue.record("\(String(describing: machine.decided))")
            return
        }
        #expect(error.code == TaskErrorCode.invalidResponse && !transient, "\(error)")
        var fresh = Self.primary()
        #expect(!fresh.head(status: 200, headers: [("Content-Length", "9223372036854775807")], finalURL: Self.url, now: 0,
                            keptCount: 0).accepted)
    }

    /// 2^62 itself is within the bound, and its sums stay in range.
    @Test func aLengthOf2To62IsAccepted() {
        var machine = Self.primary(offset: 1000, kept: 1000, validators: Self.v1)
        let head = machine.head(status: 206, headers: [("Content-Range", "bytes 1000-4611686018427387903/*"),
                                                       ("Content-Length", "4611686018427386904"), ("ETag", "\"v1\"")],
                                finalURL: Self.url, now: 0, keptCount: 1000)
        #expect(head.accepted)
        #expect(machine.expectedEnd == HalfTunes.maxByteCount)
    }

    @Test func theFirstResponseResumesRestartsOrRefuses() {
        // 206 from the kept offset, the same version: appended.
        var resumed = Self.primary(offset: 1000, kept: 1000, validators: Self.v1)
        let appended = resumed.head(status: 206, headers: Self.partial(1000..<5000, total: 5000), finalURL: Self.url,
                                    now: 0, keptCount: 1000)
        guard case .begin(let start, false)? = appended.actions.first else {
            Issue.record("\(appended.actions)")
            return
        }
        #expect(appended.accepted && start.offset == 1000 && start.keptBytes == 1000 && start.expectedTotal == 5000)
        #expect(resumed.position == 1000)

        // A whole 200 where bytes were kept without a validator: from byte 0, the file truncated.
        var whole = Self.primary(kept: 1000)
        let restarted = whole.head(status: 200, headers: [("Content-Length", "5000")], finalURL: Self.url, now: 0,
                                   keptCount: 1000)
        guard case .begin(let fresh, true)? = restarted.actions.first else {
            Issue.record("\(restarted.actions)")
            return
        }
        #expect(fresh.offset == 0 && fresh.discardedBytes == 1000 && fresh.reason == "noValidator")

        // Another version answering a resume: refused, nothing written.
        var changed = Self.primary(offset: 1000, kept: 1000, validators: Self.v1)
        let other = changed.head(status: 206, headers: Self.partial(1000..<5000, total: 5000, etag: "\"v2\""),
                                 finalURL: Self.url, now: 0, keptCount: 1000)
        #expect(!other.accepted && other.actions.isEmpty)
        guard case .changed? = changed.decided else { Issue.record("\(String(describing: changed.decided))"); return }
        #expect(changed.body(100).isEmpty)
    }
}
