// One request of a download, carried out: its HTTP task, the buffers of its body, its writes (`RequestMachine` decides).
import AsyncHTTPClient
import HalfTunesCore
import HalfTunesProtocol
import NIOCore
import NIOHTTP1

/// Used on the attempt's event loop only (see `ResponseSink`). The first request of a download (`.primary`)
/// resumes or restarts the partial file (`ResumeDecision`); a further one (`.segment`) asks for exactly one
/// range of the version the first response named (`SegmentDecision`). Body parts are gathered into ~1 MiB
/// batches written at their offsets; one batch is written at a time, and while it is in flight a full next
/// batch holds the response back (the future returned from `bodyPart`). A request stops at its `limit` (a
/// segment's end, or where the planner cut it). Those decisions are `RequestMachine`'s; this class feeds it and
/// carries out its actions (the HTTP task, the buffers, the writer, the promise that holds the response back).
/// The file, progress, checkpoints and the outcome belong to the `SegmentedDownload` every request of the
/// attempt reports to.
final class PartialFileSink: ResponseSink, @unchecked Sendable {
    /// Body parts at least this big are written from the buffer they came in; smaller ones are copied together.
    static let holdThreshold = 16 << 10
    static let smallBufferCapacity = 64 << 10

    struct Config: Sendable {
        var url: String
        /// What the request asks for (the first request's resume, or a further one's range).
        var role: RequestMachine.Role
        /// The segment's number in the attempt (0: the first request).
        var id = 0
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

    struct LoopState {
        var machine: RequestMachine
        var task: (any RunningRequest)?
        /// The bytes gathered (`machine.pendingBytes` of them).
        var pending: [ByteBuffer] = []
        var lastIsOwned = false
        /// The promise holding the response back (`RequestMachine.Action.holdBack`).
        var waiting: EventLoopPromise<Void>?
    }

    /// What must happen once the loop state is let go: calls that may re-enter this sink.
    private struct After {
        var release: EventLoopPromise<Void>?
        var stop: (task: any RunningRequest, reason: EngineAbort)?
        var fileFailed = false
        var hold: EventLoopFuture<Void>?
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
        self.box = .makeBoxSendingValue(LoopState(machine: RequestMachine(role: config.role)), eventLoop: eventLoop)
    }

    var requestHeaders: [(String, String)] {
        switch config.role {
        case .primary(let primary):
            return ResumeDecision.rangeHeaders(offset: primary.requestedOffset, validators: primary.requestValidators)
        case .segment(let range, _, let validators):
            return [("Range", "bytes=\(range.lowerBound)-\(range.upperBound - 1)"), ("If-Range", validators.ifRangeValue ?? "")]
        }
    }

    func attached(_ task: any RunningRequest) {
        let cancelled = box.withValue { s -> Bool in
            guard s.machine.phase != .finished else { return false }
            s.task = task
            return s.machine.cancelled
        }
        if cancelled { task.fail(reason: EngineAbort.decided) }
    }

    var isHoldingBack: Bool { box.withValue { $0.machine.isHoldingBack } }

    /// Where the next byte of this request goes.
    var position: Int64 { box.withValue { $0.machine.position } }

    func refuse(_ error: TaskError) {
        box.withValue { $0.machine.refuse(error) }
    }

    /// A download keeps nothing of a response it cannot go on from.
    func refuseAfterReading(_ error: TaskError) -> Bool { false }

    func bodyPart(_ buffer: ByteBuffer, now: NIODeadline) -> EventLoopFuture<Void>? {
        let after = box.withValue { s -> After in
            var after = After()
            self.carryOut(s.machine.body(buffer.readableBytes), &s, &after, part: buffer, now: now)
            return after
        }
        let hold = after.hold
        // Stopping the request is left for the loop's next turn: this is the delegate's body callback.
        afterward(after, deferringStop: true)
        return hold ?? eventLoop.makeSucceededVoidFuture()
    }

    /// The planner cut this request's range: it stops at `limit` (or now, if it is there already).
    func setLimit(_ limit: Int64) {
        feed { $0.setLimit(limit) }
    }

    /// The planner gave back the range after this request's limit (the request after it got nothing): an
    /// open-ended request goes on to `limit`, if it is still reading.
    func extendLimit(to limit: Int64) {
        box.withValue { $0.machine.extendLimit(to: limit) }
    }

    /// Stops this request now, keeping what it received (its connection is taken back).
    func stopKeepingData() {
        feed { $0.stopKeepingData() }
    }

    /// Stops this request now (another version answered elsewhere, or the file failed): nothing more is written.
    func cancel() {
        feed { $0.cancel() }
    }

    func requestFailed() {
        feed { $0.requestFailed() }
    }

    /// Submits what is left and reports the end to the download; the future is the attempt's outcome.
    func finish(_ end: AttemptEnd) -> EventLoopFuture<AttemptOutcome> {
        var transportFailure: DownloadMachine.TransportFailure?
        if case .failure(let error) = end.result {
            let (taskError, transient) = ErrorMapping.classify(error, url: end.finalURL, proxy: end.proxy)
            transportFailure = .init(error: taskError, isTransient: transient)
        }
        var summary: DownloadMachine.RequestEnd?
        feed { machine in
            let actions = machine.finish()
            summary = DownloadMachine.RequestEnd(
                decided: machine.decided, start: machine.start, expectedEnd: machine.expectedEnd,
                timedOut: end.timedOut, finalURL: end.finalURL, position: machine.position,
                reachedLimit: machine.reachedLimit, responseEnded: end.responseEnded,
                transportFailure: transportFailure)
            return actions
        }
        return download.ended(config.id, summary!)
    }

    func abandon(_ error: TaskError?) -> EventLoopFuture<AttemptOutcome> {
        box.withValue { $0.machine.abandon() }
        return download.abandon(config.id, error)
    }

    /// A checkpoint is due: the pending bytes go to the writer now, or after the write in flight.
    func flushForCheckpoint() {
        feed { $0.flushForCheckpoint() }
    }

    // MARK: - Response head

    func head(_ head: HTTPResponseHead, finalURL: String) -> Bool {
        let headers = head.headers.map { ($0.name, $0.value) }
        let (accepted, after) = box.withValue { s -> (Bool, After) in
            let (accepted, actions) = s.machine.head(status: Int(head.status.code), headers: headers,
                                                     finalURL: finalURL, now: POSIX.wallClock(),
                                                     keptCount: self.download.kept.count)
            var after = After()
            self.carryOut(actions, &s, &after, headers: headers)
            return (accepted, after)
        }
        afterward(after)
        return accepted
    }

    // MARK: - The runner

    /// Feeds the machine and carries its actions out.
    private func feed(_ input: (inout RequestMachine) -> [RequestMachine.Action]) {
        let after = box.withValue { s -> After in
            var after = After()
            self.carryOut(input(&s.machine), &s, &after)
            return after
        }
        afterward(after)
    }

    /// Carries out what can be done with the loop state held (buffers, writes, the writer's jobs); what may
    /// re-enter this sink (a promise, the HTTP task, the download) is left in `after`.
    private func carryOut(_ actions: [RequestMachine.Action], _ s: inout LoopState, _ after: inout After,
                          part: ByteBuffer? = nil, now: NIODeadline = .now(), headers: [(String, String)] = []) {
        for action in actions {
            switch action {
            case .append(let count):
                guard count > 0, let part else { continue }
                let kept = count < part.readableBytes ? part.getSlice(at: part.readerIndex, length: count) ?? ByteBuffer() : part
                append(&s, kept)
                download.received(Int64(count), now: now)
            case .submit(let offset):
                submit(&s, at: offset)
            case .dropPending:
                s.pending = []
                s.lastIsOwned = false
            case .holdBack:
                let promise = eventLoop.makePromise(of: Void.self)
                s.waiting = promise
                after.hold = promise.futureResult
            case .release:
                if let waiting = s.waiting { after.release = waiting }
                s.waiting = nil
            case .stop(let reason):
                guard let task = s.task else { continue }
                switch reason {
                case .segmentDone: after.stop = (task, .segmentDone)
                case .decided: after.stop = (task, .decided)
                case .writeFailed: after.stop = (task, .writeFailed)
                }
            case let .begin(start, truncate):
                s.machine.limitFirstRequest(download.primaryStarted(start, headers: headers))
                let attempt = self.attempt, observer = self.observer, eventLoop = self.eventLoop
                writer.begin(truncate: truncate, reserveFrom: start.offset, limit: start.expectedTotal) { ok in
                    guard ok else {
                        eventLoop.execute { self.feed { $0.writeFailed() } }
                        return
                    }
                    observer.attemptDidStart(attempt, start)
                    if truncate { observer.attemptDidCheckpoint(attempt, durable: ByteRanges()) }
                }
            case .reportComplete(let start):
                let attempt = self.attempt, observer = self.observer
                writer.callback { observer.attemptDidStart(attempt, start) }
            case .discardFile:
                let attempt = self.attempt, observer = self.observer
                writer.begin(truncate: true) { ok in
                    if ok { observer.attemptDidCheckpoint(attempt, durable: ByteRanges()) }
                }
            case .fileFailed:
                after.fileFailed = true
            }
        }
    }

    /// The calls that may re-enter this sink, in order: let the response go on, stop the request, tell the
    /// download.
    private func afterward(_ after: After, deferringStop: Bool = false) {
        after.release?.succeed(())
        if let (task, reason) = after.stop {
            if deferringStop {
                eventLoop.execute { task.fail(reason: reason) }
            } else {
                task.fail(reason: reason)
            }
        }
        if after.fileFailed { download.fileFailed() }
    }

    private func append(_ s: inout LoopState, _ buffer: ByteBuffer) {
        let n = buffer.readableBytes
        guard n > 0 else { return }
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

    private func submit(_ s: inout LoopState, at offset: Int64) {
        let batch = s.pending
        s.pending = []
        s.pending.reserveCapacity(24)
        s.lastIsOwned = false
        download.noteWrite()
        let eventLoop = self.eventLoop
        writer.write(batch, at: offset) { ok in
            eventLoop.execute { self.feed { $0.writeDone(ok: ok) } }
        }
    }
}
