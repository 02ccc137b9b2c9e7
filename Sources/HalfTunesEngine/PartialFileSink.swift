// One request of a download: its response decision, and batched writes at its offsets with backpressure.
import AsyncHTTPClient
import HalfTunesProtocol
import NIOCore
import NIOHTTP1

/// Used on the attempt's event loop only (see `ResponseSink`). The first request of a download (`.primary`)
/// resumes or restarts the partial file (`ResumeDecision`); a further one (`.segment`) asks for exactly one
/// range of the version the first response named (`SegmentDecision`). Body parts are gathered into ~1 MiB
/// batches written at their offsets; one batch is written at a time, and while it is in flight a full next
/// batch holds the response back (the future returned from `bodyPart`). A request stops at its `limit` (a
/// segment's end, or where the planner cut it). The file, progress, checkpoints and the outcome belong to the
/// `SegmentedDownload` every request of the attempt reports to.
final class PartialFileSink: ResponseSink, @unchecked Sendable {
    /// Bytes gathered before a write is submitted.
    static let batchSize = 1 << 20
    /// Body parts at least this big are written from the buffer they came in; smaller ones are copied together.
    static let holdThreshold = 16 << 10
    static let smallBufferCapacity = 64 << 10

    enum Role: Sendable {
        /// The first request: resumes from `requestedOffset` or restarts the file.
        case primary
        /// A further request for exactly `range` of the version named by `validators` (length `total`).
        case segment(range: Range<Int64>, total: Int64, validators: Validators)
    }

    struct Config: Sendable {
        var url: String
        /// The offset asked for with Range (0 when no Range was sent).
        var requestedOffset: Int64
        /// How many bytes the partial kept after prepare (what a restart from zero discards).
        var kept: Int64
        var sentIfRange: String?
        var requestValidators: Validators?
        var expectedLength: Int64?
        var role: Role = .primary
        /// The segment's number in the attempt (0: the first request).
        var id = 0
        /// Why `kept` bytes are discarded by a response from byte 0 (the download starting again after another
        /// version answered); nil: the partial had no validator to resume with.
        var restartReason: String? = nil
    }

    enum Decided: Sendable, Equatable {
        case alreadyComplete(total: Int64, start: ResponseStart)
        case discard(reason: String)
        /// The first response would have continued the kept bytes, but names another version of the resource
        /// (`ResumeDecision.changed`): the download starts again from byte 0.
        case changed(reason: String)
        case fail(TaskError, transient: Bool, retryAfter: Double?)
        /// A segment's response was not written (`SegmentDecision` other than `.accept`).
        case segment(SegmentDecision)
    }

    enum Phase { case connecting, streaming, ignoringBody, finished }

    struct LoopState {
        var task: HTTPClient.Task<Void>?
        var phase = Phase.connecting
        var decided: Decided?
        var start: ResponseStart?
        /// Absolute offset where this response's body should end, when the response says.
        var expectedEnd: Int64?
        var pending: [ByteBuffer] = []
        var pendingBytes = 0
        var lastIsOwned = false
        /// Absolute offset where the pending bytes go (the end of what was submitted for writing).
        var writeOffset: Int64 = 0
        /// Bytes at and after this offset are not this request's to write.
        var limit = Int64.max
        var reachedLimit = false
        var writesInFlight = 0
        var waiting: EventLoopPromise<Void>?
        /// A checkpoint wants the pending bytes written once the write in flight is done.
        var flushRequested = false
        var cancelled = false
    }

    let eventLoop: EventLoop
    let config: Config
    let writer: PartialWriter
    let download: SegmentedDownload
    let attempt: Attempt
    let observer: any AttemptObserver
    private let box: NIOLoopBoundBox<LoopState>

    init(eventLoop: EventLoop, config: Config, download: SegmentedDownload) {
        self.eventLoop = eventLoop
        self.config = config
        self.download = download
        self.writer = download.writer
        self.attempt = download.attempt
        self.observer = download.observer
        var state = LoopState()
        if case .segment(let range, _, _) = config.role {
            state.writeOffset = range.lowerBound
            state.limit = range.upperBound
        }
        self.box = .makeBoxSendingValue(state, eventLoop: eventLoop)
    }

    var requestHeaders: [(String, String)] {
        switch config.role {
        case .primary:
            return ResumeDecision.rangeHeaders(offset: config.requestedOffset, validators: config.requestValidators)
        case .segment(let range, _, let validators):
            return [("Range", "bytes=\(range.lowerBound)-\(range.upperBound - 1)"), ("If-Range", validators.ifRangeValue ?? "")]
        }
    }

    func attached(_ task: HTTPClient.Task<Void>) {
        let cancelled = box.withValue { s -> Bool in
            guard s.phase != .finished else { return false }
            s.task = task
            return s.cancelled
        }
        if cancelled { task.fail(reason: EngineAbort.decided) }
    }

    var isHoldingBack: Bool { box.withValue { $0.waiting != nil || $0.writesInFlight > 0 } }

    /// Where the next byte of this request goes.
    var position: Int64 { box.withValue { $0.writeOffset + Int64($0.pendingBytes) } }

    func refuse(_ error: TaskError) {
        box.withValue { s in
            s.decided = .fail(error, transient: false, retryAfter: nil)
            s.phase = .ignoringBody
        }
    }

    func bodyPart(_ buffer: ByteBuffer, now: NIODeadline) -> EventLoopFuture<Void>? {
        let (future, stop) = box.withValue { s -> (EventLoopFuture<Void>, HTTPClient.Task<Void>?) in
            guard s.phase == .streaming else { return (self.eventLoop.makeSucceededVoidFuture(), nil) }
            var part = buffer
            let room = s.limit - (s.writeOffset + Int64(s.pendingBytes))
            if Int64(part.readableBytes) >= room {
                part = part.getSlice(at: part.readerIndex, length: Int(max(0, room))) ?? ByteBuffer()
                s.reachedLimit = true
            }
            self.append(&s, part)
            self.download.received(Int64(part.readableBytes), now: now)
            if s.reachedLimit {
                // The rest of this response is another request's (or nobody's): write what is here and stop
                // reading, unless the response ends right here anyway.
                s.phase = .ignoringBody
                self.flush(&s)
                let more = s.expectedEnd.map { $0 > s.limit } ?? true
                return (self.eventLoop.makeSucceededVoidFuture(), more ? s.task : nil)
            }
            guard s.pendingBytes >= Self.batchSize else { return (self.eventLoop.makeSucceededVoidFuture(), nil) }
            if s.writesInFlight == 0 {
                self.submit(&s)
                return (self.eventLoop.makeSucceededVoidFuture(), nil)
            }
            let promise = self.eventLoop.makePromise(of: Void.self)
            s.waiting = promise
            return (promise.futureResult, nil)
        }
        if let stop { eventLoop.execute { stop.fail(reason: EngineAbort.segmentDone) } }
        return future
    }

    /// The planner cut this request's range: it stops at `limit` (or now, if it is there already).
    func setLimit(_ limit: Int64) {
        let (stop, release) = box.withValue { s -> (HTTPClient.Task<Void>?, EventLoopPromise<Void>?) in
            guard limit < s.limit else { return (nil, nil) }
            s.limit = limit
            guard s.phase == .streaming, s.writeOffset + Int64(s.pendingBytes) >= limit else { return (nil, nil) }
            s.reachedLimit = true
            s.phase = .ignoringBody
            self.flush(&s)
            defer { s.waiting = nil }
            return (s.task, s.waiting)
        }
        release?.succeed(())
        stop?.fail(reason: EngineAbort.segmentDone)
    }

    /// The planner gave back the range after this request's limit (the request after it got nothing): an
    /// open-ended request goes on to `limit`, if it is still reading.
    func extendLimit(to limit: Int64) {
        box.withValue { s in
            guard s.phase == .streaming, !s.reachedLimit, limit > s.limit else { return }
            s.limit = limit
        }
    }

    /// Stops this request now, keeping what it received (its connection is taken back): the pending bytes are
    /// written, the rest of its range is left for others.
    func stopKeepingData() {
        let (task, waiting) = box.withValue { s -> (HTTPClient.Task<Void>?, EventLoopPromise<Void>?) in
            guard s.phase != .finished else { return (nil, nil) }
            if s.phase == .streaming { self.flush(&s, force: true) }
            s.phase = .ignoringBody
            defer { s.waiting = nil }
            return (s.task, s.waiting)
        }
        waiting?.succeed(())
        task?.fail(reason: EngineAbort.segmentDone)
    }

    /// Stops this request now (another version answered elsewhere, or the file failed): nothing more is written.
    func cancel() {
        let (task, waiting) = box.withValue { s -> (HTTPClient.Task<Void>?, EventLoopPromise<Void>?) in
            s.cancelled = true
            guard s.phase != .finished else { return (nil, nil) }
            s.phase = .ignoringBody
            s.pending = []
            s.pendingBytes = 0
            defer { s.waiting = nil }
            return (s.task, s.waiting)
        }
        waiting?.succeed(())
        task?.fail(reason: EngineAbort.decided)
    }

    func requestFailed() {
        let waiting = box.withValue { s -> EventLoopPromise<Void>? in
            defer { s.waiting = nil }
            return s.waiting
        }
        waiting?.succeed(())
    }

    /// Submits what is left and reports the end to the download; the future is the attempt's outcome.
    func finish(_ end: AttemptEnd) -> EventLoopFuture<AttemptOutcome> {
        var transportFailure: DownloadMachine.TransportFailure?
        if case .failure(let error) = end.result {
            let (taskError, transient) = ErrorMapping.classify(error, url: end.finalURL, proxy: end.proxy)
            transportFailure = .init(error: taskError, isTransient: transient)
        }
        let (waiting, summary) = box.withValue { s -> (EventLoopPromise<Void>?, DownloadMachine.RequestEnd) in
            let streamed = s.phase == .streaming
            if streamed || s.reachedLimit { self.flush(&s, force: true) }
            s.phase = .finished
            let waiting = s.waiting
            s.waiting = nil
            let summary = DownloadMachine.RequestEnd(
                decided: s.decided, start: s.start, expectedEnd: s.expectedEnd, timedOut: end.timedOut,
                finalURL: end.finalURL, position: s.writeOffset + Int64(s.pendingBytes), reachedLimit: s.reachedLimit,
                responseEnded: end.responseEnded, transportFailure: transportFailure)
            return (waiting, summary)
        }
        waiting?.succeed(())
        return download.ended(config.id, summary)
    }

    func abandon(_ error: TaskError?) -> EventLoopFuture<AttemptOutcome> {
        box.withValue { $0.phase = .finished }
        return download.abandon(config.id, error)
    }

    // MARK: - Response head

    func head(_ head: HTTPResponseHead, finalURL: String) -> Bool {
        box.withValue { s in
            switch self.config.role {
            case .primary:
                return self.decide(&s, head: head, finalURL: finalURL)
            case let .segment(range, total, validators):
                guard !s.cancelled else { return false }
                let decision = SegmentDecision.decide(range: range, total: total, validators: validators,
                                                      status: Int(head.status.code),
                                                      headers: head.headers.map { ($0.name, $0.value) },
                                                      now: POSIX.wallClock(), url: finalURL)
                guard decision == .accept else {
                    s.decided = .segment(decision)
                    s.phase = .ignoringBody
                    return false
                }
                s.expectedEnd = range.upperBound
                s.phase = .streaming
                return true
            }
        }
    }

    /// Applies the resume decision; returns false when the response is refused (the request is then failed).
    private func decide(_ s: inout LoopState, head: HTTPResponseHead, finalURL: String) -> Bool {
        let headers = head.headers.map { ($0.name, $0.value) }
        let status = Int(head.status.code)
        let decision = ResumeDecision.decide(requestedOffset: config.requestedOffset, status: status, headers: headers,
                                             now: POSIX.wallClock(), sentIfRange: config.sentIfRange, url: finalURL,
                                             knownTotal: config.expectedLength,
                                             kept: ResourceVersion(validators: config.requestValidators,
                                                                   total: config.expectedLength))
        let received = Validators(etag: head.headers.first(name: "ETag"),
                                  lastModified: head.headers.first(name: "Last-Modified"))
        let attempt = self.attempt, observer = self.observer
        switch decision {
        case .start(let total):
            let discarded = config.kept
            accept(&s, status: status, headers: headers, offset: 0, total: total, validators: received,
                   discarded: discarded, reason: discarded > 0 ? config.restartReason ?? "noValidator" : nil,
                   finalURL: finalURL)
            return true
        case .append(let total):
            // `ResumeDecision` checked that the response names the kept bytes' version, validators included.
            let validators = received
            accept(&s, status: status, headers: headers, offset: config.requestedOffset,
                   total: total ?? config.expectedLength, validators: validators, discarded: 0, reason: nil,
                   finalURL: finalURL)
            return true
        case .restartFromZero(let total, let reason):
            accept(&s, status: status, headers: headers, offset: 0, total: total, validators: received,
                   discarded: config.kept, reason: reason, finalURL: finalURL)
            return true
        case .alreadyComplete(let total):
            let validators = received.isEmpty ? (config.requestValidators ?? received) : received
            let start = ResponseStart(status: status, offset: total, discardedBytes: 0, reason: nil,
                                      expectedTotal: total, validators: validators, finalURL: finalURL)
            s.decided = .alreadyComplete(total: total, start: start)
            s.start = start
            s.phase = .ignoringBody
            writer.callback { observer.attemptDidStart(attempt, start) }
            return true
        case .changed(let reason):
            // Nothing is written; the download truncates the file and asks from byte 0 (`SegmentedDownload`).
            s.decided = .changed(reason: reason)
            s.phase = .ignoringBody
            return false
        case .discardAndRetry(let reason):
            s.decided = .discard(reason: reason)
            s.phase = .ignoringBody
            writer.begin(truncate: true) { ok in
                if ok { observer.attemptDidCheckpoint(attempt, durable: ByteRanges()) }
            }
            return false
        case .fail(let error, let transient, let retryAfter):
            s.decided = .fail(error, transient: transient, retryAfter: retryAfter)
            s.phase = .ignoringBody
            return false
        }
    }

    private func accept(_ s: inout LoopState, status: Int, headers: [(String, String)], offset: Int64, total: Int64?,
                        validators: Validators, discarded: Int64, reason: String?, finalURL: String) {
        var end = ResumeDecision.contentLength(headers).map { offset + $0 }
        if end == nil, status == 206, let value = ResumeDecision.header("Content-Range", in: headers),
           let range = ContentRange.parse(value), let last = range.end {
            end = last + 1
        }
        let start = ResponseStart(status: status, offset: offset, discardedBytes: discarded, reason: reason,
                                  expectedTotal: total ?? (status == 206 ? nil : end), validators: validators,
                                  finalURL: finalURL, keptBytes: offset > 0 ? max(offset, download.kept.count) : 0,
                                  contentDisposition: ResumeDecision.header("Content-Disposition", in: headers))
        s.start = start
        s.expectedEnd = end
        s.writeOffset = offset
        s.phase = .streaming
        if let limit = download.primaryStarted(start, headers: headers) { s.limit = limit }
        let attempt = self.attempt, observer = self.observer, eventLoop = self.eventLoop
        writer.begin(truncate: discarded > 0, reserveFrom: offset, limit: start.expectedTotal) { ok in
            guard ok else {
                eventLoop.execute { self.writeFailed() }
                return
            }
            observer.attemptDidStart(attempt, start)
            if discarded > 0 { observer.attemptDidCheckpoint(attempt, durable: ByteRanges()) }
        }
    }

    // MARK: - Body batching

    private func append(_ s: inout LoopState, _ buffer: ByteBuffer) {
        let n = buffer.readableBytes
        guard n > 0 else { return }
        s.pendingBytes += n
        if n >= Self.holdThreshold {
            s.pending.append(buffer)
            s.lastIsOwned = false
            return
        }
        let last = s.pending.count - 1
        if s.lastIsOwned, s.pending[last].writableBytes >= n {
            s.pending[last].writeImmutableBuffer(buffer)
            return
        }
        var own = ByteBufferAllocator().buffer(capacity: Self.smallBufferCapacity)
        own.writeImmutableBuffer(buffer)
        s.pending.append(own)
        s.lastIsOwned = true
    }

    /// A checkpoint is due: the pending bytes go to the writer now, or after the write in flight.
    func flushForCheckpoint() {
        let release = box.withValue { s -> EventLoopPromise<Void>? in
            guard s.phase == .streaming, s.pendingBytes > 0 else { return nil }
            self.flush(&s)
            guard s.pendingBytes == 0 else { return nil }
            defer { s.waiting = nil }
            return s.waiting
        }
        release?.succeed(())
    }

    /// Submits the pending bytes now if no write is in flight (or `force`: the request is over), else once
    /// it is done.
    private func flush(_ s: inout LoopState, force: Bool = false) {
        guard s.pendingBytes > 0 else { return }
        if s.writesInFlight == 0 || force {
            submit(&s)
        } else {
            s.flushRequested = true
        }
    }

    private func submit(_ s: inout LoopState) {
        let batch = s.pending
        let offset = s.writeOffset
        s.writeOffset += Int64(s.pendingBytes)
        s.pending = []
        s.pending.reserveCapacity(24)
        s.pendingBytes = 0
        s.lastIsOwned = false
        s.flushRequested = false
        s.writesInFlight += 1
        download.noteWrite()
        let eventLoop = self.eventLoop
        writer.write(batch, at: offset) { ok in
            eventLoop.execute { self.writeDone(ok: ok) }
        }
    }

    private func writeDone(ok: Bool) {
        guard ok else {
            box.withValue { $0.writesInFlight -= 1 }
            writeFailed()
            return
        }
        let release = box.withValue { s -> EventLoopPromise<Void>? in
            s.writesInFlight -= 1
            guard s.phase == .streaming || s.flushRequested else { return nil }
            if s.writesInFlight == 0, s.pendingBytes >= Self.batchSize || s.flushRequested {
                self.submit(&s)
            }
            guard s.pendingBytes < Self.batchSize else { return nil }
            defer { s.waiting = nil }
            return s.waiting
        }
        release?.succeed(())
    }

    /// A write, truncate or fsync failed: stop receiving (the outcome reports the file error).
    private func writeFailed() {
        let (task, waiting) = box.withValue { s -> (HTTPClient.Task<Void>?, EventLoopPromise<Void>?) in
            guard s.phase != .finished else { return (nil, nil) }
            s.phase = .ignoringBody
            defer { s.waiting = nil }
            return (s.task, s.waiting)
        }
        waiting?.succeed(())
        task?.fail(reason: EngineAbort.writeFailed)
        download.fileFailed()
    }
}
