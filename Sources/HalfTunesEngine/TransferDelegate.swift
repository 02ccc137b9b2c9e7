// The AsyncHTTPClient delegate of one transfer: response decision, batching with backpressure, timers.
import AsyncHTTPClient
import HalfTunesProtocol
import NIOCore
import NIOHTTP1

/// Runs on the transfer's event loop (requests use `.delegateAndChannel(on:)`), so body parts arrive without hops.
/// Body parts are gathered into ~1 MiB batches; one batch is written at a time, and while it is in flight a full
/// next batch holds the response back (the future returned from `didReceiveBodyPart`).
///
/// Nothing here calls into AsyncHTTPClient or completes a promise while the loop state is being accessed:
/// those calls can re-enter the delegate synchronously.
final class TransferDelegate: HTTPClientResponseDelegate {
    typealias Response = Void

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
        var idleTimeout: TimeAmount
        var checkpointInterval: TimeAmount
        var progressInterval: TimeAmount
        /// The session's `allowInsecureRedirects` (https → http).
        var allowInsecureRedirects = false
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
        var finalURL: String
        /// URLs requested in this attempt, the first one first (for `RedirectPolicy`).
        var visited: [String] = []
        var decided: Decided?
        var start: ResponseStart?
        /// Absolute offset where this response's body should end, when the response says.
        var expectedEnd: Int64?
        /// Absolute offset of the received data (written or pending).
        var received: Int64
        var pending: [ByteBuffer] = []
        var pendingBytes = 0
        var lastIsOwned = false
        var writesInFlight = 0
        var waiting: EventLoopPromise<Void>?
        var syncInFlight = false
        /// A checkpoint is due; it goes with the next batch, once the write in flight is done.
        var syncRequested = false
        var unsynced = false
        var lastActivity = NIODeadline.now()
        var idleTimer: Scheduled<Void>?
        var checkpointTimer: RepeatedTask?
        var lastProgressAt = NIODeadline.now()
        /// Reports bytes left unreported by the interval even if no further body part comes (a stall).
        var progressTimer: Scheduled<Void>?
        var reportedBytes: Int64
        var timedOut = false
        var ended = false
    }

    /// What the loop state snapshot says after the request ended.
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
    let transfer: Transfer
    let observer: any TransferObserver
    private let box: NIOLoopBoundBox<LoopState>
    /// Bandwidth limits: delays acknowledging body parts (nil: unlimited).
    let throttle: BodyThrottle?

    init(eventLoop: EventLoop, config: Config, writer: PartialWriter, transfer: Transfer, observer: any TransferObserver) {
        self.eventLoop = eventLoop
        self.config = config
        self.writer = writer
        self.transfer = transfer
        self.observer = observer
        let state = LoopState(finalURL: config.url, received: config.kept, reportedBytes: config.kept)
        self.box = .makeBoxSendingValue(state, eventLoop: eventLoop)
        self.throttle = transfer.rateLimiter.map { BodyThrottle(limiter: $0, eventLoop: eventLoop) }
    }

    // MARK: - Lifecycle

    /// Starts the idle and checkpoint timers; `task` is what they cancel.
    func attach(_ task: HTTPClient.Task<Void>) {
        eventLoop.execute {
            self.box.withValue { s in
                guard s.phase != .finished, s.task == nil else { return }
                s.task = task
                s.lastActivity = .now()
                self.scheduleIdleCheck(&s, at: s.lastActivity + self.config.idleTimeout)
                let interval = self.config.checkpointInterval
                s.checkpointTimer = self.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
                    self.checkpointTick()
                }
            }
        }
    }

    /// Called for every response head, redirects included, before AsyncHTTPClient follows one: a redirect
    /// that `RedirectPolicy` refuses fails the request here, so the refused URL is never requested.
    func didVisitURL(task: HTTPClient.Task<Void>, _ request: HTTPClient.Request, _ head: HTTPResponseHead) {
        let url = request.url.absoluteString
        let refused = box.withValue { s -> Bool in
            s.finalURL = url
            s.lastActivity = .now()
            if s.visited.isEmpty { s.visited = [url] }
            let verdict = RedirectPolicy.evaluate(from: url, status: Int(head.status.code),
                                                  location: head.headers.first(name: "Location"), visited: s.visited,
                                                  allowInsecure: self.config.allowInsecureRedirects)
            switch verdict {
            case .notARedirect:
                return false
            case .follow(let target):
                s.visited.append(target)
                return false
            case .refuse(let error):
                s.decided = .fail(error, transient: false, retryAfter: nil)
                s.phase = .ignoringBody
                return true
            }
        }
        if refused { task.fail(reason: EngineAbort.decided) }
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        let accepted = box.withValue { s -> Bool in
            s.lastActivity = .now()
            return self.decide(&s, head: head)
        }
        return accepted ? eventLoop.makeSucceededVoidFuture() : eventLoop.makeFailedFuture(EngineAbort.decided)
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let acknowledged = receiveBodyPart(buffer)
        return throttle?.admit(buffer.readableBytes, acknowledged: acknowledged) ?? acknowledged
    }

    private func receiveBodyPart(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        box.withValue { s -> EventLoopFuture<Void> in
            guard s.phase == .streaming else { return self.eventLoop.makeSucceededVoidFuture() }
            let n = buffer.readableBytes
            let now = NIODeadline.now()
            s.lastActivity = now
            s.received += Int64(n)
            self.append(&s, buffer)
            self.transfer.setBytesReceived(s.received)
            if now - s.lastProgressAt >= self.config.progressInterval {
                self.emitProgress(&s, now: now)
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

    func didReceiveError(task: HTTPClient.Task<Void>, _ error: Error) {
        let waiting = box.withValue { s -> EventLoopPromise<Void>? in
            s.ended = true
            defer { s.waiting = nil }
            return s.waiting
        }
        waiting?.succeed(())
        throttle?.release()
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {
        box.withValue { $0.ended = true }
    }

    /// After the request's future completed: flushes, fsyncs, checkpoints, closes, and decides the outcome.
    func finish(result: Result<Void, Error>) -> EventLoopFuture<TransferOutcome> {
        let promise = eventLoop.makePromise(of: TransferOutcome.self)
        let (waiting, batch, info) = box.withValue { s -> (EventLoopPromise<Void>?, [ByteBuffer], FinishInfo) in
            s.idleTimer?.cancel()
            s.checkpointTimer?.cancel()
            s.progressTimer?.cancel()
            let streamed = s.phase == .streaming
            s.phase = .finished
            let waiting = s.waiting
            s.waiting = nil
            let batch = s.pending
            s.pending = []
            s.pendingBytes = 0
            if streamed, case .success = result {
                self.emitProgress(&s, now: .now())
            } else if streamed, s.received != s.reportedBytes {
                self.emitProgress(&s, now: .now())
            }
            let info = FinishInfo(decided: s.decided, start: s.start, expectedEnd: s.expectedEnd,
                                  timedOut: s.timedOut, finalURL: s.finalURL)
            return (waiting, batch, info)
        }
        waiting?.succeed(())
        throttle?.release()
        let transfer = self.transfer, observer = self.observer, url = config.url
        writer.finish(batch, checkpoint: { durable in
            observer.transferDidCheckpoint(transfer, durableBytes: durable)
        }, done: { snapshot in
            let stopRequested = transfer.isStopRequested
            promise.succeed(TransferOutcomeRules.outcome(result: result, stopRequested: stopRequested, info: info,
                                                         snapshot: snapshot, url: url))
        })
        return promise.futureResult
    }

    // MARK: - Response head

    /// Applies the resume decision; returns false when the response is refused (the request is then failed).
    private func decide(_ s: inout LoopState, head: HTTPResponseHead) -> Bool {
        let headers = head.headers.map { ($0.name, $0.value) }
        let status = Int(head.status.code)
        let decision = ResumeDecision.decide(requestedOffset: config.requestedOffset, status: status, headers: headers,
                                             now: POSIX.wallClock(), sentIfRange: config.sentIfRange, url: s.finalURL,
                                             knownTotal: config.expectedLength)
        let received = Validators(etag: head.headers.first(name: "ETag"),
                                  lastModified: head.headers.first(name: "Last-Modified"))
        let transfer = self.transfer, observer = self.observer
        switch decision {
        case .start(let total):
            let discarded = config.kept
            accept(&s, status: status, headers: headers, offset: 0, total: total, validators: received,
                   discarded: discarded, reason: discarded > 0 ? "noValidator" : nil)
            return true
        case .append(let total):
            let validators = received.isEmpty ? (config.requestValidators ?? received) : received
            accept(&s, status: status, headers: headers, offset: config.requestedOffset,
                   total: total ?? config.expectedLength, validators: validators, discarded: 0, reason: nil)
            return true
        case .restartFromZero(let total, let reason):
            accept(&s, status: status, headers: headers, offset: 0, total: total, validators: received,
                   discarded: config.kept, reason: reason)
            return true
        case .alreadyComplete(let total):
            let validators = received.isEmpty ? (config.requestValidators ?? received) : received
            let start = ResponseStart(status: status, offset: total, discardedBytes: 0, reason: nil,
                                      expectedTotal: total, validators: validators, finalURL: s.finalURL)
            s.decided = .alreadyComplete(total: total, start: start)
            s.start = start
            s.phase = .ignoringBody
            writer.callback { observer.transferDidStart(transfer, start) }
            return true
        case .discardAndRetry(let reason):
            s.decided = .discard(reason: reason)
            s.phase = .ignoringBody
            writer.begin(truncate: true) { ok in
                if ok { observer.transferDidCheckpoint(transfer, durableBytes: 0) }
            }
            return false
        case .fail(let error, let transient, let retryAfter):
            s.decided = .fail(error, transient: transient, retryAfter: retryAfter)
            s.phase = .ignoringBody
            return false
        }
    }

    private func accept(_ s: inout LoopState, status: Int, headers: [(String, String)], offset: Int64, total: Int64?,
                        validators: Validators, discarded: Int64, reason: String?) {
        var end = ResumeDecision.contentLength(headers).map { offset + $0 }
        if end == nil, status == 206, let value = ResumeDecision.header("Content-Range", in: headers),
           let range = ContentRange.parse(value), let last = range.end {
            end = last + 1
        }
        let start = ResponseStart(status: status, offset: offset, discardedBytes: discarded, reason: reason,
                                  expectedTotal: total ?? (status == 206 ? nil : end), validators: validators,
                                  finalURL: s.finalURL)
        s.start = start
        s.expectedEnd = end
        s.received = offset
        s.reportedBytes = offset
        s.lastProgressAt = .now()
        s.phase = .streaming
        transfer.setBytesReceived(offset)
        let transfer = self.transfer, observer = self.observer, eventLoop = self.eventLoop
        writer.begin(truncate: discarded > 0) { ok in
            guard ok else {
                eventLoop.execute { self.writeFailed() }
                return
            }
            observer.transferDidStart(transfer, start)
            if discarded > 0 { observer.transferDidCheckpoint(transfer, durableBytes: 0) }
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
        let transfer = self.transfer, observer = self.observer, eventLoop = self.eventLoop
        writer.write(batch, sync: sync, written: { ok in
            eventLoop.execute { self.writeDone(ok: ok) }
        }, checkpoint: { durable in
            observer.transferDidCheckpoint(transfer, durableBytes: durable)
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
            s.lastActivity = .now()
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
        throttle?.release()
        task?.fail(reason: EngineAbort.writeFailed)
    }

    private func emitProgress(_ s: inout LoopState, now: NIODeadline) {
        let delta = s.received - s.reportedBytes
        let total = s.received
        let expected = s.start?.expectedTotal
        s.reportedBytes = total
        s.lastProgressAt = now
        let transfer = self.transfer, observer = self.observer
        writer.callback {
            observer.transferDidWrite(transfer, bytesWritten: delta, totalBytesWritten: total, totalBytesExpected: expected)
        }
    }

    // MARK: - Timers

    /// Else the bytes received just before a stall stayed unreported (bytesReceived behind even bytesDurable).
    private func scheduleTrailingProgress(_ s: inout LoopState) {
        s.progressTimer = eventLoop.scheduleTask(deadline: s.lastProgressAt + config.progressInterval) {
            self.box.withValue { s in
                s.progressTimer = nil
                guard s.phase == .streaming, s.received != s.reportedBytes else { return }
                let now = NIODeadline.now()
                if now - s.lastProgressAt < self.config.progressInterval { return self.scheduleTrailingProgress(&s) }
                self.emitProgress(&s, now: now)
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

    private func scheduleIdleCheck(_ s: inout LoopState, at deadline: NIODeadline) {
        s.idleTimer = eventLoop.scheduleTask(deadline: deadline) { self.idleCheck() }
    }

    private func idleCheck() {
        let expired = box.withValue { s -> HTTPClient.Task<Void>? in
            guard s.phase != .finished, !s.ended else { return nil }
            let now = NIODeadline.now()
            // While our own writes hold the response back, the silence is ours, not the server's.
            if s.waiting != nil || self.throttle?.isHolding == true { s.lastActivity = now }
            let due = s.lastActivity + self.config.idleTimeout
            guard now >= due else {
                self.scheduleIdleCheck(&s, at: due)
                return nil
            }
            s.timedOut = true
            return s.task
        }
        expired?.fail(reason: EngineAbort.idleTimeout)
    }
}
