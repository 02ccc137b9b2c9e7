// A download attempt's file side: one partial file, one or more ranged requests, progress, checkpoints, outcome.
import AsyncHTTPClient
import HalfTunesProtocol
import NIOCore

/// Owns what the requests of one download attempt share, on the attempt's event loop: the `PartialWriter`,
/// the progress of the task (one stream of totals, whatever the number of requests), the checkpoints (every
/// `checkpointInterval`: the requests hand their pending bytes to the writer, one fsync makes every range
/// durable, then the observer journals the ranges), the `SegmentPlanner` once the first response allows
/// ranges, and the outcome once the last request ended.
///
/// The first request (segment 0) decides about the file as a single request always did. When its response
/// has a length and a validator and the server takes ranges, and more than one connection is allowed (or an
/// earlier attempt left gaps), the planner may split the rest: each further request asks for exactly its
/// range with `If-Range`, and only a 206 for that range of that version is written (`SegmentDecision`).
/// Another version seen by any request stops them all and truncates the file: the next attempt starts from
/// byte 0, and nothing of two versions is ever mixed.
final class SegmentedDownload: @unchecked Sendable {
    struct Settings: Sendable {
        var checkpointInterval: TimeAmount
        var progressInterval: TimeAmount
        var maxConnections: Int
        /// How often the planner is asked what to do.
        var planInterval: TimeAmount = .milliseconds(100)
    }

    struct LoopState {
        var sinks: [Int: PartialFileSink] = [:]
        var planner: SegmentPlanner?
        /// Bytes the file has, as reported to the observer (the durable ones kept, plus what arrived since).
        var received: ProgressPacer
        var expectedTotal: Int64?
        var progressTimer: Scheduled<Void>?
        var checkpointTimer: RepeatedTask?
        var planTimer: RepeatedTask?
        var syncInFlight = false
        var unsynced = false
        /// The first request's end (the outcome of a download that was never split comes from it alone).
        var primary: (info: PartialFileSink.FinishInfo, end: AttemptEnd)?
        var start: ResponseStart?
        var lastFailure: TransferFailure?
        /// Another version of the resource answered: why.
        var changed: String?
        /// A further request was not served as asked: the durable data kept is the part from byte 0 only.
        var unsplittable = false
        /// The download already started again from byte 0 after another version answered.
        var restarted = false
        var fileFailed = false
        var finishing = false
        /// Connections granted by the observer beyond the first (`attemptWantsConnection`), not given back yet.
        var extrasHeld = 0
        /// Requests stopped because the observer took their connection back (`shed`).
        var shed: Set<Int> = []
    }

    let eventLoop: EventLoop
    let writer: PartialWriter
    let attempt: Attempt
    let observer: any AttemptObserver
    let settings: Settings
    /// What the file kept from earlier attempts.
    let kept: ByteRanges
    private let promise: EventLoopPromise<AttemptOutcome>
    private let box: NIOLoopBoundBox<LoopState>

    init(eventLoop: EventLoop, writer: PartialWriter, attempt: Attempt, observer: any AttemptObserver,
         settings: Settings) {
        self.eventLoop = eventLoop
        self.writer = writer
        self.attempt = attempt
        self.observer = observer
        self.settings = settings
        self.kept = writer.keptRanges
        self.promise = eventLoop.makePromise(of: AttemptOutcome.self)
        let state = LoopState(received: ProgressPacer(interval: settings.progressInterval, total: writer.keptRanges.count))
        self.box = .makeBoxSendingValue(state, eventLoop: eventLoop)
    }

    /// The first request's sink (made off the event loop, before anything runs on it).
    func makePrimary(_ config: PartialFileSink.Config) -> PartialFileSink {
        var config = config
        config.id = 0
        config.role = .primary
        return PartialFileSink(eventLoop: eventLoop, config: config, download: self)
    }

    /// The first request is under way (from any thread): counts it and starts the checkpoint timer.
    func started(_ primary: PartialFileSink) {
        eventLoop.execute {
            self.box.withValue { s in
                guard !s.finishing, s.primary == nil, s.checkpointTimer == nil else { return }
                s.sinks[0] = primary
                let interval = self.settings.checkpointInterval
                s.checkpointTimer = self.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
                    self.checkpointTick()
                }
            }
        }
    }

    // MARK: - From the requests

    /// The first response was accepted (from `start.offset`); returns where the first request must stop, when
    /// that is before the end. Decides whether the download may be split.
    func primaryStarted(_ start: ResponseStart, headers: [(String, String)]) -> Int64? {
        box.withValue { s -> Int64? in
            s.start = start
            s.expectedTotal = start.expectedTotal
            // Only a response that appends keeps what the file had; any other starts the file anew.
            let keptNow = start.offset > 0 ? kept : ByteRanges()
            s.received.restart(at: keptNow.count)
            guard let total = start.expectedTotal, total > 0, start.validators.ifRangeValue != nil,
                  start.status == 206 || Self.acceptsRanges(headers) else { return nil }
            let gapsAfter = keptNow.ranges.contains { $0.lowerBound > start.offset }
            guard settings.maxConnections > 1 || gapsAfter else { return nil }
            let planner = SegmentPlanner(settings: .init(maxConnections: settings.maxConnections), total: total,
                                         kept: keptNow, primaryFrom: start.offset, now: Self.seconds(.now()))
            s.planner = planner
            let interval = settings.planInterval
            s.planTimer = eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in self.plan() }
            return planner.primaryLimit < total ? planner.primaryLimit : nil
        }
    }

    /// A request received `bytes` (within its range) at `now`.
    func received(_ bytes: Int64, now: NIODeadline) {
        guard bytes > 0 else { return }
        box.withValue { s in
            if let report = s.received.add(bytes, now: now) {
                self.emitProgress(report, expected: s.expectedTotal)
            } else if s.progressTimer == nil {
                self.scheduleTrailingProgress(&s)
            }
        }
    }

    /// A request submitted a write.
    func noteWrite() {
        box.withValue { $0.unsynced = true }
    }

    /// A write failed: every request stops (the outcome reports the file error).
    func fileFailed() {
        let others = box.withValue { s -> [PartialFileSink] in
            s.fileFailed = true
            return Array(s.sinks.values)
        }
        for sink in others { sink.cancel() }
    }

    /// A request ended. Returns the attempt's outcome (complete once the last request ended).
    func ended(_ id: Int, info: PartialFileSink.FinishInfo, end: AttemptEnd) -> EventLoopFuture<AttemptOutcome> {
        var released = 0
        var refused: Double?? = nil
        let (finish, stop, actions) = box.withValue { s -> (Bool, [PartialFileSink], [SegmentPlanner.Action]) in
            s.sinks[id] = nil
            if id == 0 { s.primary = (info, end) }
            // The first response named another version than the kept bytes': they go, and (once per attempt)
            // the download asks for the whole resource again.
            if id == 0, case .changed(let reason)? = info.decided { s.changed = reason }
            released = Self.releaseExtras(&s)
            guard var planner = s.planner else { return (s.sinks.isEmpty, [], []) }
            defer { s.planner = planner }
            let kind = self.classify(&s, id: id, info: info, end: end)
            if kind == .unsplittable { s.unsplittable = true }
            if kind == .refused { refused = .some(s.lastFailure?.retryAfter) }
            var actions = planner.ended(id, position: info.position, kind)
            if s.changed != nil || s.fileFailed || self.attempt.isStopRequested {
                let others = s.changed != nil ? Array(s.sinks.values) : []
                return (s.sinks.isEmpty, others, actions)
            }
            // The last request ended short: the attempt ends (the task's retry goes on later), rather than
            // asking again at once what was just refused.
            if kind != .reachedLimit, kind != .shed, s.sinks.isEmpty { return (true, [], []) }
            if !planner.isComplete { actions += self.tick(&planner, extrasHeld: &s.extrasHeld) }
            let opens = actions.contains { if case .open = $0 { true } else { false } }
            return (s.sinks.isEmpty && !opens, [], actions)
        }
        for _ in 0..<released { observer.attemptReleasedConnection(attempt) }
        if case .some(let retryAfter) = refused { observer.attemptConnectionRefused(attempt, retryAfter: retryAfter) }
        for sink in stop { sink.cancel() }
        carryOut(actions)
        if finish { finalize() }
        return promise.futureResult
    }

    /// The attempt ended before its first request was sent.
    func abandon(_ id: Int, _ error: TaskError?) -> EventLoopFuture<AttemptOutcome> {
        box.withValue { s in
            s.sinks[id] = nil
            s.finishing = true
            s.checkpointTimer?.cancel()
        }
        let attempt = self.attempt, observer = self.observer, promise = self.promise
        writer.finish([], at: 0, done: { snapshot in
            observer.attemptDidCheckpoint(attempt, durable: snapshot.durableRanges)
            guard let error else { return promise.succeed(.stopped(durable: snapshot.durableRanges)) }
            promise.succeed(.failed(TransferFailure(error: error, isTransient: false, durable: snapshot.durableRanges)))
        })
        return promise.futureResult
    }

    // MARK: - Segments

    /// The observer takes `count` connections back (another task for the host is waiting): the newest further
    /// requests stop now (from any thread). What they wrote stays; the rest of their ranges is fetched by the
    /// connections left, or later ones the observer grants.
    func shed(_ count: Int) {
        eventLoop.execute {
            let victims = self.box.withValue { s -> [PartialFileSink] in
                let candidates = s.sinks.keys.filter { !s.shed.contains($0) }.sorted(by: >)
                let ids = candidates.prefix(min(count, max(0, candidates.count - 1)))
                s.shed.formUnion(ids)
                return ids.compactMap { s.sinks[$0] }
            }
            for sink in victims { sink.stopKeepingData() }
        }
    }

    /// Asks the planner what to do now, asking the observer for each connection beyond the first.
    private func tick(_ planner: inout SegmentPlanner, extrasHeld: inout Int) -> [SegmentPlanner.Action] {
        var granted = 0
        let attempt = self.attempt, observer = self.observer
        let actions = planner.tick(now: Self.seconds(.now()), ceiling: attempt.rateCeiling, mayOpen: {
            guard observer.attemptWantsConnection(attempt) else { return false }
            granted += 1
            return true
        })
        extrasHeld += granted
        return actions
    }

    /// Connections granted beyond the first that no request uses any more: how many to give back.
    private static func releaseExtras(_ s: inout LoopState) -> Int {
        let excess = s.extrasHeld - max(0, s.sinks.count - 1)
        guard excess > 0 else { return 0 }
        s.extrasHeld -= excess
        return excess
    }

    /// How a segment's end counts for the planner; remembers failures and a changed resource.
    private func classify(_ s: inout LoopState, id: Int, info: PartialFileSink.FinishInfo, end: AttemptEnd) -> SegmentPlanner.End {
        let wasShed = s.shed.remove(id) != nil
        if info.reachedLimit { return .reachedLimit }
        if wasShed {
            if case .segment(.changed)? = info.decided {} else { return .shed }
        }
        switch info.decided {
        case .segment(.changed(let reason))?:
            s.changed = reason
            return .failed
        case .segment(.unsplittable)?:
            return .unsplittable
        case .segment(.refused(let error, let retryAfter))?:
            s.lastFailure = TransferFailure(error: error, isTransient: true, retryAfter: retryAfter, durable: ByteRanges())
            return .refused
        case .segment(.failed(let error, let transient))?:
            s.lastFailure = TransferFailure(error: error, isTransient: transient, durable: ByteRanges())
            return .failed
        case .fail(let error, let transient, let retryAfter)?:
            s.lastFailure = TransferFailure(error: error, isTransient: transient, retryAfter: retryAfter, durable: ByteRanges())
            return .failed
        default:
            break
        }
        if case .success = end.result, end.responseEnded { return .reachedLimit }
        if end.timedOut {
            s.lastFailure = TransferFailure(error: ErrorMapping.idleTimeout(end.finalURL), isTransient: true,
                                            durable: ByteRanges())
        } else if case .failure(let error) = end.result {
            let (taskError, transient) = ErrorMapping.classify(error, url: end.finalURL, proxy: end.proxy)
            s.lastFailure = TransferFailure(error: taskError, isTransient: transient, durable: ByteRanges())
        }
        return .failed
    }

    private func plan() {
        let actions = box.withValue { s -> [SegmentPlanner.Action] in
            guard !s.finishing, s.changed == nil, !s.fileFailed, !self.attempt.isStopRequested,
                  var planner = s.planner else { return [] }
            for (id, sink) in s.sinks { planner.progress(id, position: sink.position) }
            let actions = self.tick(&planner, extrasHeld: &s.extrasHeld)
            s.planner = planner
            return actions
        }
        carryOut(actions)
    }

    private func carryOut(_ actions: [SegmentPlanner.Action]) {
        for action in actions {
            switch action {
            case let .shrink(id, limit):
                box.withValue { $0.sinks[id] }?.setLimit(limit)
            case let .extend(id, limit):
                box.withValue { $0.sinks[id] }?.extendLimit(to: limit)
            case let .open(id, range):
                let made = box.withValue { s -> (PartialFileSink, String)? in
                    guard let start = s.start, let total = s.planner?.total else { return nil }
                    let config = PartialFileSink.Config(
                        url: start.finalURL, requestedOffset: range.lowerBound, kept: 0, sentIfRange: nil,
                        requestValidators: start.validators, expectedLength: total,
                        role: .segment(range: range, total: total, validators: start.validators), id: id)
                    let sink = PartialFileSink(eventLoop: self.eventLoop, config: config, download: self)
                    s.sinks[id] = sink
                    return (sink, start.finalURL)
                }
                if let (sink, url) = made { attempt.launchSegment(sink, url: url, eventLoop: eventLoop) }
            }
        }
    }

    // MARK: - The end

    private func finalize() {
        let restart = box.withValue { s in s.changed != nil && !s.restarted && !self.attempt.isStopRequested }
        if restart { return restartFromZero() }
        let (changed, primary, planner, lastFailure, start, unsplittable) = box.withValue { s in
            s.finishing = true
            s.checkpointTimer?.cancel()
            s.planTimer?.cancel()
            s.progressTimer?.cancel()
            if let report = s.received.flush(now: .now()) { self.emitProgress(report, expected: s.expectedTotal) }
            return (s.changed, s.primary, s.planner, s.lastFailure, s.start, s.unsplittable)
        }
        let attempt = self.attempt, observer = self.observer, promise = self.promise
        if let changed {
            // Nothing of this version may stay next to another's: the next attempt starts from byte 0.
            writer.begin(truncate: true) { _ in }
            writer.finish([], at: 0, done: { snapshot in
                observer.attemptDidCheckpoint(attempt, durable: snapshot.durableRanges)
                let url = start?.finalURL ?? ""
                let error = TaskError(code: TaskErrorCode.invalidResponse,
                                      message: "The resource at \(url) changed during the download (\(changed)); "
                                          + "what was written is discarded and the next attempt starts from byte 0")
                promise.succeed(.failed(TransferFailure(error: error, isTransient: true, durable: snapshot.durableRanges)))
            })
            return
        }
        let stopRequested = attempt.isStopRequested
        writer.finish([], at: 0, done: { finished in
            var snapshot = finished
            if unsplittable, !snapshot.durableRanges.covers(total: planner?.total ?? -1) {
                // The server does not serve further ranges as asked: the next attempt resumes the part from
                // byte 0 with one request, which the bytes after it would only confuse.
                snapshot.durableRanges = ByteRanges(prefix: snapshot.durableRanges.prefixLength)
            }
            let outcome: AttemptOutcome
            if let planner, let start {
                outcome = Self.segmentedOutcome(total: planner.total, start: start, stopRequested: stopRequested,
                                                snapshot: snapshot, lastFailure: lastFailure)
            } else if let primary {
                outcome = PartialFileOutcome.outcome(result: primary.end.result, stopRequested: stopRequested,
                                                     info: primary.info, snapshot: snapshot, url: primary.info.finalURL,
                                                     proxy: primary.end.proxy)
            } else {
                outcome = .stopped(durable: snapshot.durableRanges)
            }
            // The last checkpoint, unless the download is complete: then its durable length goes to the
            // journal with the publish intent (the core's next write of the task), one write fewer per file.
            if case .completed = outcome {} else {
                observer.attemptDidCheckpoint(attempt, durable: snapshot.durableRanges)
            }
            promise.succeed(outcome)
        })
    }

    /// Another version answered while the download was split: what was written is discarded at once and one
    /// request asks for the whole resource again (once per attempt; `didResumeAtOffset` says why).
    private func restartFromZero() {
        let discarded = writer.snapshot.writtenRanges.count
        let attempt = self.attempt, observer = self.observer
        writer.begin(truncate: true) { ok in
            if ok { observer.attemptDidCheckpoint(attempt, durable: ByteRanges()) }
        }
        let config = PartialFileSink.Config(url: attempt.url, requestedOffset: 0, kept: discarded,
                                            sentIfRange: nil, requestValidators: nil, expectedLength: nil,
                                            role: .primary, id: 0, restartReason: "resourceChanged")
        let sink = PartialFileSink(eventLoop: eventLoop, config: config, download: self)
        box.withValue { s in
            s.restarted = true
            s.changed = nil
            s.planTimer?.cancel()
            s.planTimer = nil
            s.planner = nil
            s.primary = nil
            s.start = nil
            s.lastFailure = nil
            s.unsplittable = false
            s.sinks[0] = sink
        }
        attempt.launchSegment(sink, url: attempt.url, eventLoop: eventLoop)
    }

    static func segmentedOutcome(total: Int64, start: ResponseStart, stopRequested: Bool,
                                 snapshot: PartialWriter.Snapshot, lastFailure: TransferFailure?) -> AttemptOutcome {
        let durable = snapshot.durableRanges
        if let error = snapshot.error { return PartialFileOutcome.fileFailure(error, durable: durable) }
        if durable.covers(total: total), snapshot.writtenRanges == durable {
            return .completed(totalBytes: total, validators: start.validators)
        }
        if stopRequested { return .stopped(durable: durable) }
        var failure = lastFailure ?? TransferFailure(
            error: TaskError(code: TaskErrorCode.connectionLost,
                             message: "The download from \(start.finalURL) ended with bytes \(ByteRanges(durable.gaps(total: total))) missing"),
            isTransient: true, durable: durable)
        failure.durable = durable
        return .failed(failure)
    }

    // MARK: - Progress and checkpoints

    private func emitProgress(_ report: ProgressPacer.Report, expected: Int64?) {
        let attempt = self.attempt, observer = self.observer
        let total = expected.map { min(report.total, $0) } ?? report.total
        writer.callback {
            observer.attemptDidReceive(attempt, bytes: report.delta, totalBytes: total, totalBytesExpected: expected)
        }
    }

    /// Else the bytes received just before a stall stayed unreported (bytesReceived behind even bytesDurable).
    private func scheduleTrailingProgress(_ s: inout LoopState) {
        s.progressTimer = eventLoop.scheduleTask(deadline: s.received.lastReportAt + s.received.interval) {
            self.box.withValue { s in
                s.progressTimer = nil
                guard !s.finishing, s.received.isBehind else { return }
                let now = NIODeadline.now()
                if now - s.received.lastReportAt < s.received.interval { return self.scheduleTrailingProgress(&s) }
                if let report = s.received.flush(now: now) { self.emitProgress(report, expected: s.expectedTotal) }
            }
        }
    }

    private func checkpointTick() {
        let sinks = box.withValue { s -> [PartialFileSink]? in
            guard !s.finishing, !s.syncInFlight, !s.sinks.isEmpty else { return nil }
            return Array(s.sinks.values)
        }
        guard let sinks else { return }
        for sink in sinks { sink.flushForCheckpoint() }
        let due = box.withValue { s -> Bool in
            guard s.unsynced else { return false }
            s.unsynced = false
            s.syncInFlight = true
            return true
        }
        guard due else { return }
        let attempt = self.attempt, observer = self.observer, eventLoop = self.eventLoop
        writer.sync(checkpoint: { durable in
            observer.attemptDidCheckpoint(attempt, durable: durable)
        }, synced: {
            eventLoop.execute { self.box.withValue { $0.syncInFlight = false } }
        })
    }

    // MARK: - Helpers

    static func acceptsRanges(_ headers: [(String, String)]) -> Bool {
        guard let value = ResumeDecision.header("Accept-Ranges", in: headers) else { return false }
        return value.split(separator: ",").contains { String($0).trimmingSpaces.lowercased() == "bytes" }
    }

    static func seconds(_ deadline: NIODeadline) -> Double {
        Double(deadline.uptimeNanoseconds) / 1e9
    }
}
