// A download's response sink: the resume decision, batched writes with backpressure, checkpoints.
import AsyncHTTPClient
import HalfTunesProtocol
import NIOCore
import NIOHTTP1

/// Used on the attempt's event loop only (see `ResponseSink`). Body parts are gathered into ~1 MiB batches;
/// one batch is written at a time, and while it is in flight a full next batch holds the response back (the
/// future returned from `bodyPart`). Observer calls go through the writer's callback queue, so progress and
/// checkpoints reach the observer in the order the data was written.
final class PartialFileSink: ResponseSink, @unchecked Sendable {
    /// Bytes gathered before a write is submitted.
    static let batchSize = 1 << 20
    /// Body parts at least this big are written from the buffer they came in; smaller ones are copied together.
    static let holdThreshold = 16 << 10
    static let smallBufferCapacity = 64 << 10

    struct Config: Sendable {
        var url: String
        /// The offset asked for with Range (0 when no Range was sent).
        var requestedOffset: Int64
        /// The partial's length after prepare.
        var kept: Int64
        var sentIfRange: String?
        var requestValidators: Validators?
        var expectedLength: Int64?
        var checkpointInterval: TimeAmount
    }

    enum Decided: Sendable {
        case alreadyComplete(total: Int64, start: ResponseStart)
        case discard(reason: String)
        case fail(TaskError, transient: Bool, retryAfter: Double?)
    }

    enum Phase { case connecting, streaming, ignoringBody, finished }

    struct LoopState {
        var task: HTTPClient.Task<Void>?
        var phase = Phase.connecting
        var decided: Decided?
        var start: ResponseStart?
        /// Absolute offset where this response's body should end, when the response says.
        var expectedEnd: Int64?
        /// Absolute offset of the received data (written or pending), paced for progress reports.
        var received: ProgressPacer
        var pending: [ByteBuffer] = []
        var pendingBytes = 0
        /// Absolute offset where the pending bytes go (the end of what was submitted for writing).
        var writeOffset: Int64 = 0
        var lastIsOwned = false
        var writesInFlight = 0
        var waiting: EventLoopPromise<Void>?
        var syncInFlight = false
        /// A checkpoint is due; it goes with the next batch, once the write in flight is done.
        var syncRequested = false
        var unsynced = false
        var checkpointTimer: RepeatedTask?
        /// Reports bytes left unreported by the interval even if no further body part comes (a stall).
        var progressTimer: Scheduled<Void>?
    }

    /// What the loop state says after the request ended.
    struct FinishInfo: Sendable {
        var decided: Decided?
        var start: ResponseStart?
        var expectedEnd: Int64?
        var timedOut: Bool
        var finalURL: String
    }

    let eventLoop: EventLoop
    let config: Config
    let writer: PartialWriter
    let attempt: Attempt
    let observer: any AttemptObserver
    private let box: NIOLoopBoundBox<LoopState>

    init(eventLoop: EventLoop, config: Config, progressInterval: TimeAmount, writer: PartialWriter, attempt: Attempt,
         observer: any AttemptObserver) {
        self.eventLoop = eventLoop
        self.config = config
        self.writer = writer
        self.attempt = attempt
        self.observer = observer
        let state = LoopState(received: ProgressPacer(interval: progressInterval, total: config.kept))
        self.box = .makeBoxSendingValue(state, eventLoop: eventLoop)
    }

    var requestHeaders: [(String, String)] {
        ResumeDecision.rangeHeaders(offset: config.requestedOffset, validators: config.requestValidators)
    }

    func attached(_ task: HTTPClient.Task<Void>) {
        box.withValue { s in
            guard s.phase != .finished else { return }
            s.task = task
            let interval = self.config.checkpointInterval
            s.checkpointTimer = self.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
                self.checkpointTick()
            }
        }
    }

    var isHoldingBack: Bool { box.withValue { $0.waiting != nil || $0.writesInFlight > 0 } }

    func refuse(_ error: TaskError) {
        box.withValue { s in
            s.decided = .fail(error, transient: false, retryAfter: nil)
            s.phase = .ignoringBody
        }
    }

    func bodyPart(_ buffer: ByteBuffer, now: NIODeadline) -> EventLoopFuture<Void>? {
        box.withValue { s -> EventLoopFuture<Void> in
            guard s.phase == .streaming else { return self.eventLoop.makeSucceededVoidFuture() }
            self.append(&s, buffer)
            if let report = s.received.add(Int64(buffer.readableBytes), now: now) {
                self.emitProgress(report, expected: s.start?.expectedTotal)
            } else if s.progressTimer == nil {
                self.scheduleTrailingProgress(&s)
            }
            guard s.pendingBytes >= Self.batchSize else { return self.eventLoop.makeSucceededVoidFuture() }
            if s.writesInFlight == 0 {
                self.submit(&s, sync: false)
                return self.eventLoop.makeSucceededVoidFuture()
            }
            let promise = self.eventLoop.makePromise(of: Void.self)
            s.waiting = promise
            return promise.futureResult
        }
    }

    func requestFailed() {
        let waiting = box.withValue { s -> EventLoopPromise<Void>? in
            defer { s.waiting = nil }
            return s.waiting
        }
        waiting?.succeed(())
    }

    /// Flushes, fsyncs, checkpoints, closes, and decides the outcome.
    func finish(_ end: AttemptEnd) -> EventLoopFuture<AttemptOutcome> {
        let promise = eventLoop.makePromise(of: AttemptOutcome.self)
        let (waiting, batch, info) = box.withValue { s -> (EventLoopPromise<Void>?, ([ByteBuffer], Int64), FinishInfo) in
            s.checkpointTimer?.cancel()
            s.progressTimer?.cancel()
            let streamed = s.phase == .streaming
            s.phase = .finished
            let waiting = s.waiting
            s.waiting = nil
            let batch = s.pending
            let offset = s.writeOffset
            s.pending = []
            s.pendingBytes = 0
            if streamed, let report = s.received.flush(now: .now()) {
                self.emitProgress(report, expected: s.start?.expectedTotal)
            }
            let info = FinishInfo(decided: s.decided, start: s.start, expectedEnd: s.expectedEnd,
                                  timedOut: end.timedOut, finalURL: end.finalURL)
            return (waiting, (batch, offset), info)
        }
        waiting?.succeed(())
        let attempt = self.attempt, observer = self.observer, url = config.url, result = end.result
        writer.finish(batch.0, at: batch.1, done: { snapshot in
            let outcome = PartialFileOutcome.outcome(result: result, stopRequested: attempt.isStopRequested,
                                                     info: info, snapshot: snapshot, url: url)
            // The last checkpoint, unless the download is complete: then its durable length goes to the
            // journal with the publish intent (the core's next write of the task), one write fewer per file.
            if case .completed = outcome {} else {
                observer.attemptDidCheckpoint(attempt, durable: snapshot.durableRanges)
            }
            promise.succeed(outcome)
        })
        return promise.futureResult
    }

    func abandon(_ error: TaskError?) -> EventLoopFuture<AttemptOutcome> {
        let promise = eventLoop.makePromise(of: AttemptOutcome.self)
        box.withValue { $0.phase = .finished }
        let attempt = self.attempt, observer = self.observer
        writer.finish([], at: 0, done: { snapshot in
            observer.attemptDidCheckpoint(attempt, durable: snapshot.durableRanges)
            guard let error else { return promise.succeed(.stopped(durable: snapshot.durableRanges)) }
            promise.succeed(.failed(TransferFailure(error: error, isTransient: false, durable: snapshot.durableRanges)))
        })
        return promise.futureResult
    }

    // MARK: - Response head

    func head(_ head: HTTPResponseHead, finalURL: String) -> Bool {
        box.withValue { s in self.decide(&s, head: head, finalURL: finalURL) }
    }

    /// Applies the resume decision; returns false when the response is refused (the request is then failed).
    private func decide(_ s: inout LoopState, head: HTTPResponseHead, finalURL: String) -> Bool {
        let headers = head.headers.map { ($0.name, $0.value) }
        let status = Int(head.status.code)
        let decision = ResumeDecision.decide(requestedOffset: config.requestedOffset, status: status, headers: headers,
                                             now: POSIX.wallClock(), sentIfRange: config.sentIfRange, url: finalURL,
                                             knownTotal: config.expectedLength)
        let received = Validators(etag: head.headers.first(name: "ETag"),
                                  lastModified: head.headers.first(name: "Last-Modified"))
        let attempt = self.attempt, observer = self.observer
        switch decision {
        case .start(let total):
            let discarded = config.kept
            accept(&s, status: status, headers: headers, offset: 0, total: total, validators: received,
                   discarded: discarded, reason: discarded > 0 ? "noValidator" : nil, finalURL: finalURL)
            return true
        case .append(let total):
            let validators = received.isEmpty ? (config.requestValidators ?? received) : received
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
                                  finalURL: finalURL)
        s.start = start
        s.expectedEnd = end
        s.received.restart(at: offset)
        s.writeOffset = offset
        s.phase = .streaming
        let attempt = self.attempt, observer = self.observer, eventLoop = self.eventLoop
        writer.begin(truncate: discarded > 0, preallocateTo: start.expectedTotal) { ok in
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

    private func submit(_ s: inout LoopState, sync: Bool) {
        let batch = s.pending
        let offset = s.writeOffset
        s.writeOffset += Int64(s.pendingBytes)
        s.pending = []
        s.pending.reserveCapacity(24)
        s.pendingBytes = 0
        s.lastIsOwned = false
        s.writesInFlight += 1
        if sync {
            s.syncInFlight = true
            s.syncRequested = false
            s.unsynced = false
        } else if !batch.isEmpty {
            s.unsynced = true
        }
        let attempt = self.attempt, observer = self.observer, eventLoop = self.eventLoop
        writer.write(batch, at: offset, sync: sync, written: { ok in
            eventLoop.execute { self.writeDone(ok: ok) }
        }, checkpoint: { durable in
            observer.attemptDidCheckpoint(attempt, durable: durable)
        }, synced: {
            eventLoop.execute { self.box.withValue { $0.syncInFlight = false } }
        })
    }

    private func writeDone(ok: Bool) {
        guard ok else {
            box.withValue { $0.writesInFlight -= 1 }
            writeFailed()
            return
        }
        let release = box.withValue { s -> EventLoopPromise<Void>? in
            s.writesInFlight -= 1
            guard s.phase == .streaming else { return nil }
            if s.writesInFlight == 0, s.pendingBytes >= Self.batchSize || s.syncRequested {
                self.submit(&s, sync: s.syncRequested)
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
    }

    private func emitProgress(_ report: ProgressPacer.Report, expected: Int64?) {
        let attempt = self.attempt, observer = self.observer
        writer.callback {
            observer.attemptDidReceive(attempt, bytes: report.delta, totalBytes: report.total,
                                       totalBytesExpected: expected)
        }
    }

    // MARK: - Timers

    /// Else the bytes received just before a stall stayed unreported (bytesReceived behind even bytesDurable).
    private func scheduleTrailingProgress(_ s: inout LoopState) {
        s.progressTimer = eventLoop.scheduleTask(deadline: s.received.lastReportAt + s.received.interval) {
            self.box.withValue { s in
                s.progressTimer = nil
                guard s.phase == .streaming, s.received.isBehind else { return }
                let now = NIODeadline.now()
                if now - s.received.lastReportAt < s.received.interval { return self.scheduleTrailingProgress(&s) }
                if let report = s.received.flush(now: now) { self.emitProgress(report, expected: s.start?.expectedTotal) }
            }
        }
    }

    private func checkpointTick() {
        let release = box.withValue { s -> EventLoopPromise<Void>? in
            guard s.phase == .streaming, !s.syncInFlight, s.pendingBytes > 0 || s.unsynced else { return nil }
            guard s.writesInFlight == 0 else {
                s.syncRequested = true  // one batch in flight at a time: writeDone submits it
                return nil
            }
            self.submit(&s, sync: true)
            defer { s.waiting = nil }
            return s.waiting
        }
        release?.succeed(())
    }
}
