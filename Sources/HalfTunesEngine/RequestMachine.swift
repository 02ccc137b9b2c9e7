// What one request of a download does with its response head, its body, its limits and its writes: a pure state machine.
import HalfTunesCore
import HalfTunesProtocol

/// The decisions of one request of a download attempt (`PartialFileSink` carries them out): whether its response
/// is written (the first request through `ResumeDecision`, a further one through `SegmentDecision`) and from which
/// offset; where it stops (its limit, cut or extended by the planner); when the bytes gathered are handed to the
/// writer (a batch of `batchSize`, one write in flight at a time, everything when it must stop); when the response
/// is held back (a full batch waits for the write in flight) and let go again. The machine counts bytes only: the
/// runner keeps the buffers, and every `.submit` hands over all of them.
struct RequestMachine: Sendable {
    /// What a request asks for.
    enum Role: Sendable, Equatable {
        /// The first request: resumes from `requestedOffset` or restarts the file.
        case primary(Primary)
        /// A further request for exactly `range` of the version named by `validators` (length `total`).
        case segment(range: Range<Int64>, total: Int64, validators: Validators)
    }

    struct Primary: Sendable, Equatable {
        /// The offset asked for with Range (0 when no Range was sent).
        var requestedOffset: Int64
        /// How many bytes the partial kept after prepare (what a restart from zero discards).
        var kept: Int64
        var sentIfRange: String? = nil
        var requestValidators: Validators? = nil
        var expectedLength: Int64? = nil
        /// Why `kept` bytes are discarded by a response from byte 0 (the download starting again after another
        /// version answered); nil: the partial had no validator to resume with.
        var restartReason: String? = nil
    }

    enum Phase: Sendable, Equatable { case connecting, streaming, ignoringBody, finished }

    /// Why a request is stopped (the runner fails its HTTP task with the matching `EngineAbort`).
    enum Stop: Sendable, Equatable { case segmentDone, decided, writeFailed }

    enum Action: Sendable, Equatable {
        /// Keep the first `bytes` of the body part that arrived (and count them as received).
        case append(Int)
        /// Hand every byte gathered to the writer, at this offset.
        case submit(at: Int64)
        /// Forget the bytes gathered.
        case dropPending
        /// Hold the response back until `.release` (a full batch waits for the write in flight).
        case holdBack
        /// Let a held-back response go on.
        case release
        /// Stop the HTTP request.
        case stop(Stop)
        /// The first response is accepted from `start.offset`: prepare the file (truncated when `truncate`, space
        /// reserved from the offset up to the expected total), then report the start, and an empty checkpoint when
        /// kept bytes were discarded.
        case begin(ResponseStart, truncate: Bool)
        /// The file is already complete: report the start (nothing is written).
        case reportComplete(ResponseStart)
        /// The kept bytes are unusable: truncate the file and checkpoint it empty.
        case discardFile
        /// A write failed: the download stops every request.
        case fileFailed
    }

    /// Bytes gathered before a write is submitted.
    static let batchSize = 1 << 20

    let role: Role
    private(set) var phase = Phase.connecting
    private(set) var decided: PartialFileSink.Decided?
    private(set) var start: ResponseStart?
    /// Absolute offset where this response's body should end, when the response says.
    private(set) var expectedEnd: Int64?
    private(set) var pendingBytes = 0
    /// Absolute offset where the pending bytes go (the end of what was submitted for writing).
    private(set) var writeOffset: Int64 = 0
    /// Bytes at and after this offset are not this request's to write.
    private(set) var limit = Int64.max
    private(set) var reachedLimit = false
    private(set) var writesInFlight = 0
    /// The response is held back (`.holdBack` without `.release` yet).
    private(set) var holding = false
    /// A checkpoint wants the pending bytes written once the write in flight is done.
    private var flushRequested = false
    private(set) var cancelled = false

    init(role: Role) {
        self.role = role
        if case .segment(let range, _, _) = role {
            writeOffset = range.lowerBound
            limit = range.upperBound
        }
    }

    /// Where the next byte of this request goes.
    var position: Int64 { writeOffset + Int64(pendingBytes) }
    /// The request's own work holds the response back.
    var isHoldingBack: Bool { holding || writesInFlight > 0 }

    // MARK: - The response head

    /// The final response head. Returns whether the response is taken (false: the request is failed) and what to
    /// do. `keptCount`: how many bytes the file keeps from earlier attempts (the progress totals count from there).
    mutating func head(status: Int, headers: [(String, String)], finalURL: String, now: Double,
                       keptCount: Int64) -> (accepted: Bool, actions: [Action]) {
        switch role {
        case .primary(let primary):
            return primaryHead(primary, status: status, headers: headers, finalURL: finalURL, now: now,
                               keptCount: keptCount)
        case let .segment(range, total, validators):
            guard !cancelled else { return (false, []) }
            let decision = SegmentDecision.decide(range: range, total: total, validators: validators, status: status,
                                                  headers: headers, now: now, url: finalURL)
            guard decision == .accept else {
                decided = .segment(decision)
                phase = .ignoringBody
                return (false, [])
            }
            expectedEnd = range.upperBound
            phase = .streaming
            return (true, [])
        }
    }

    private mutating func primaryHead(_ primary: Primary, status: Int, headers: [(String, String)], finalURL: String,
                                      now: Double, keptCount: Int64) -> (accepted: Bool, actions: [Action]) {
        let decision = ResumeDecision.decide(requestedOffset: primary.requestedOffset, status: status, headers: headers,
                                             now: now, sentIfRange: primary.sentIfRange, url: finalURL,
                                             knownTotal: primary.expectedLength,
                                             kept: ResourceVersion(validators: primary.requestValidators,
                                                                   total: primary.expectedLength))
        let received = Validators(etag: ResumeDecision.header("ETag", in: headers),
                                  lastModified: ResumeDecision.header("Last-Modified", in: headers))
        switch decision {
        case .start(let total):
            let discarded = primary.kept
            return (true, accept(status: status, headers: headers, offset: 0, total: total, validators: received,
                                 discarded: discarded,
                                 reason: discarded > 0 ? primary.restartReason ?? "noValidator" : nil,
                                 finalURL: finalURL, keptCount: keptCount))
        case .append(let total):
            // `ResumeDecision` checked that the response names the kept bytes' version, validators included.
            return (true, accept(status: status, headers: headers, offset: primary.requestedOffset,
                                 total: total ?? primary.expectedLength, validators: received, discarded: 0,
                                 reason: nil, finalURL: finalURL, keptCount: keptCount))
        case .restartFromZero(let total, let reason):
            return (true, accept(status: status, headers: headers, offset: 0, total: total, validators: received,
                                 discarded: primary.kept, reason: reason, finalURL: finalURL, keptCount: keptCount))
        case .alreadyComplete(let total):
            let validators = received.isEmpty ? (primary.requestValidators ?? received) : received
            let start = ResponseStart(status: status, offset: total, discardedBytes: 0, reason: nil,
                                      expectedTotal: total, validators: validators, finalURL: finalURL)
            decided = .alreadyComplete(total: total, start: start)
            self.start = start
            phase = .ignoringBody
            return (true, [.reportComplete(start)])
        case .changed(let reason):
            // Nothing is written; the download truncates the file and asks from byte 0 (`DownloadMachine`).
            decided = .changed(reason: reason)
            phase = .ignoringBody
            return (false, [])
        case .discardAndRetry(let reason):
            decided = .discard(reason: reason)
            phase = .ignoringBody
            return (false, [.discardFile])
        case .fail(let error, let transient, let retryAfter):
            decided = .fail(error, transient: transient, retryAfter: retryAfter)
            phase = .ignoringBody
            return (false, [])
        }
    }

    private mutating func accept(status: Int, headers: [(String, String)], offset: Int64, total: Int64?,
                                 validators: Validators, discarded: Int64, reason: String?, finalURL: String,
                                 keptCount: Int64) -> [Action] {
        // Both at most `HalfTunes.maxByteCount` (`ResumeDecision` refused larger ones); checked all the same.
        var end = ResumeDecision.contentLength(headers).flatMap { length -> Int64? in
            let sum = offset.addingReportingOverflow(length)
            return sum.overflow ? nil : sum.partialValue
        }
        if end == nil, status == 206, let value = ResumeDecision.header("Content-Range", in: headers),
           let range = ContentRange.parse(value), let last = range.end {
            end = last + 1
        }
        let start = ResponseStart(status: status, offset: offset, discardedBytes: discarded, reason: reason,
                                  expectedTotal: total ?? (status == 206 ? nil : end), validators: validators,
                                  finalURL: finalURL, keptBytes: offset > 0 ? max(offset, keptCount) : 0,
                                  contentDisposition: ResumeDecision.header("Content-Disposition", in: headers))
        self.start = start
        expectedEnd = end
        writeOffset = offset
        phase = .streaming
        return [.begin(start, truncate: discarded > 0)]
    }

    /// The download's planner says where the first request stops (nil: at the end).
    mutating func limitFirstRequest(_ limit: Int64?) {
        if let limit { self.limit = limit }
    }

    /// A redirect was refused before it was followed.
    mutating func refuse(_ error: TaskError) {
        decided = .fail(error, transient: false, retryAfter: nil)
        phase = .ignoringBody
    }

    // MARK: - The body

    /// A body part of `count` bytes arrived.
    mutating func body(_ count: Int) -> [Action] {
        guard phase == .streaming else { return [] }
        var keep = count
        let room = limit - position
        if Int64(count) >= room {
            keep = Int(max(0, room))
            reachedLimit = true
        }
        pendingBytes += keep
        var actions: [Action] = [.append(keep)]
        if reachedLimit {
            // The rest of this response is another request's (or nobody's): write what is here and stop reading,
            // unless the response ends right here anyway.
            phase = .ignoringBody
            flush(into: &actions)
            if expectedEnd.map({ $0 > limit }) ?? true { actions.append(.stop(.segmentDone)) }
            return actions
        }
        guard pendingBytes >= Self.batchSize else { return actions }
        if writesInFlight == 0 {
            submit(into: &actions)
        } else {
            holding = true
            actions.append(.holdBack)
        }
        return actions
    }

    /// The planner cut this request's range: it stops at `limit` (or now, if it is there already).
    mutating func setLimit(_ newLimit: Int64) -> [Action] {
        guard newLimit < limit else { return [] }
        limit = newLimit
        guard phase == .streaming, position >= newLimit else { return [] }
        reachedLimit = true
        phase = .ignoringBody
        var actions: [Action] = []
        flush(into: &actions)
        release(into: &actions)
        actions.append(.stop(.segmentDone))
        return actions
    }

    /// The planner gave back the range after this request's limit (the request after it got nothing): an
    /// open-ended request goes on to `limit`, if it is still reading.
    mutating func extendLimit(to newLimit: Int64) {
        guard phase == .streaming, !reachedLimit, newLimit > limit else { return }
        limit = newLimit
    }

    /// Stops this request now, keeping what it received (its connection is taken back): the pending bytes are
    /// written, the rest of its range is left for others.
    mutating func stopKeepingData() -> [Action] {
        guard phase != .finished else { return [] }
        var actions: [Action] = []
        if phase == .streaming { flush(into: &actions, force: true) }
        phase = .ignoringBody
        release(into: &actions)
        actions.append(.stop(.segmentDone))
        return actions
    }

    /// Stops this request now (another version answered elsewhere, or the file failed): nothing more is written.
    mutating func cancel() -> [Action] {
        cancelled = true
        guard phase != .finished else { return [] }
        phase = .ignoringBody
        pendingBytes = 0
        flushRequested = false // nothing is left to flush (else the write in flight's end would submit nothing)
        var actions: [Action] = [.dropPending]
        release(into: &actions)
        actions.append(.stop(.decided))
        return actions
    }

    /// The HTTP request failed: let go of anything held.
    mutating func requestFailed() -> [Action] {
        var actions: [Action] = []
        release(into: &actions)
        return actions
    }

    /// The request is over: what is left is written; returns the actions and where the request got to.
    mutating func finish() -> [Action] {
        var actions: [Action] = []
        if phase == .streaming || reachedLimit { flush(into: &actions, force: true) }
        phase = .finished
        release(into: &actions)
        return actions
    }

    /// The request ended before it was sent.
    mutating func abandon() {
        phase = .finished
    }

    // MARK: - Writes

    /// A checkpoint is due: the pending bytes go to the writer now, or after the write in flight.
    mutating func flushForCheckpoint() -> [Action] {
        guard phase == .streaming, pendingBytes > 0 else { return [] }
        var actions: [Action] = []
        flush(into: &actions)
        if pendingBytes == 0 { release(into: &actions) }
        return actions
    }

    /// A write submitted earlier ended.
    mutating func writeDone(ok: Bool) -> [Action] {
        writesInFlight -= 1
        guard ok else { return writeFailed() }
        guard phase == .streaming || flushRequested else { return [] }
        var actions: [Action] = []
        if writesInFlight == 0, pendingBytes > 0, pendingBytes >= Self.batchSize || flushRequested {
            submit(into: &actions)
        }
        guard pendingBytes < Self.batchSize else { return actions }
        release(into: &actions)
        return actions
    }

    /// A write, truncate or fsync failed: stop receiving (the outcome reports the file error).
    mutating func writeFailed() -> [Action] {
        // Even after the request is over: the download stops its other requests.
        guard phase != .finished else { return [.fileFailed] }
        phase = .ignoringBody
        var actions: [Action] = []
        release(into: &actions)
        actions += [.stop(.writeFailed), .fileFailed]
        return actions
    }

    /// Submits the pending bytes now if no write is in flight (or `force`: the request is over), else once it is
    /// done.
    private mutating func flush(into actions: inout [Action], force: Bool = false) {
        guard pendingBytes > 0 else { return }
        if writesInFlight == 0 || force {
            submit(into: &actions)
        } else {
            flushRequested = true
        }
    }

    private mutating func submit(into actions: inout [Action]) {
        actions.append(.submit(at: writeOffset))
        writeOffset += Int64(pendingBytes)
        pendingBytes = 0
        flushRequested = false
        writesInFlight += 1
    }

    private mutating func release(into actions: inout [Action]) {
        guard holding else { return }
        holding = false
        actions.append(.release)
    }
}
