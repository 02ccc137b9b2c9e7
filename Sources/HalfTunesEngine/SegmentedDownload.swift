// A download attempt's runner: one partial file, its requests, timers, progress and checkpoints (`DownloadMachine` decides).
import AsyncHTTPClient
import HalfTunesCore
import HalfTunesProtocol
import NIOCore

/// Owns what the requests of one download attempt share, on the attempt's event loop: the `PartialWriter`,
/// the progress of the task (one stream of totals, whatever the number of requests), the checkpoints (every
/// `checkpointInterval`: the requests hand their pending bytes to the writer, one fsync makes every range
/// durable, then the observer journals the ranges), and the `DownloadMachine` that decides whether the
/// download is split, what each request's end means for the others, and how the attempt ends. This class
/// feeds the machine and carries out its actions; it decides nothing.
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
        var machine: DownloadMachine
        /// The requests the machine counts as running, by segment id.
        var sinks: [Int: PartialFileSink] = [:]
        var progressTimer: Scheduled<Void>?
        var checkpointTimer: RepeatedTask?
        var planTimer: RepeatedTask?
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
        let machine = DownloadMachine(settings: .init(maxConnections: settings.maxConnections,
                                                      progressInterval: settings.progressInterval.seconds),
                                      kept: writer.keptRanges)
        let state = LoopState(machine: machine)
        self.box = .makeBoxSendingValue(state, eventLoop: eventLoop)
    }

    /// The first request's sink (made off the event loop, before anything runs on it).
    func makePrimary(_ config: PartialFileSink.Config) -> PartialFileSink {
        var config = config
        config.id = 0
        return PartialFileSink(eventLoop: eventLoop, config: config, download: self)
    }

    /// The first request is under way (from any thread).
    func started(_ primary: PartialFileSink) {
        eventLoop.execute {
            let actions = self.box.withValue { s in
                let actions = s.machine.handle(.launched)
                if s.machine.running.contains(0), s.sinks[0] == nil { s.sinks[0] = primary }
                return actions
            }
            self.carryOut(actions)
        }
    }

    // MARK: - From the requests

    /// The first response was accepted (from `start.offset`); returns where the first request must stop, when
    /// that is before the end. Called inside the first request's loop state, so that limit is returned for it
    /// to apply, not carried out on it.
    func primaryStarted(_ start: ResponseStart, headers: [(String, String)]) -> Int64? {
        var limit: Int64?
        let actions = box.withValue { s -> [DownloadMachine.Action] in
            s.machine.handle(.responseStarted(start, acceptsRanges: Self.acceptsRanges(headers),
                                              now: NIODeadline.now().seconds))
        }.filter { action in
            guard case .limitPrimary(let value) = action else { return true }
            limit = value
            return false
        }
        carryOut(actions)
        return limit
    }

    /// A request received `bytes` (within its range) at `now`.
    func received(_ bytes: Int64, now: NIODeadline) {
        guard bytes > 0 else { return }
        feed(.received(bytes: bytes, now: now.seconds))
    }

    /// A request submitted a write.
    func noteWrite() {
        feed(.wrote)
    }

    /// A write failed: every request stops (the outcome reports the file error).
    func fileFailed() {
        feed(.fileFailed)
    }

    /// A request ended. Returns the attempt's outcome (complete once the last request ended).
    func ended(_ id: Int, _ end: DownloadMachine.RequestEnd) -> EventLoopFuture<AttemptOutcome> {
        box.withValue { _ = $0.sinks.removeValue(forKey: id) }
        feed(.ended(id: id, end, stopRequested: attempt.isStopRequested))
        return promise.futureResult
    }

    /// The attempt ended before its first request was sent.
    func abandon(_ id: Int, _ error: TaskError?) -> EventLoopFuture<AttemptOutcome> {
        box.withValue { _ = $0.sinks.removeValue(forKey: id) }
        feed(.abandoned(id: id, error))
        return promise.futureResult
    }

    /// The observer takes `count` connections back (another task for the host is waiting): the newest further
    /// requests stop now (from any thread). What they wrote stays; the rest of their ranges is fetched by the
    /// connections left, or later ones the observer grants.
    func shed(_ count: Int) {
        eventLoop.execute { self.feed(.shed(count: count)) }
    }

    // MARK: - The runner

    private func feed(_ input: DownloadMachine.Input) {
        carryOut(box.withValue { $0.machine.handle(input) })
    }

    /// Carries out each action in order, touching the loop state only between calls out (a request stopped
    /// here may end, and feed the machine, before this returns).
    private func carryOut(_ actions: [DownloadMachine.Action]) {
        for action in actions {
            switch action {
            case .startCheckpoints:
                box.withValue { s in
                    guard s.checkpointTimer == nil else { return }
                    let interval = self.settings.checkpointInterval
                    s.checkpointTimer = self.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
                        self.feed(.checkpointDue)
                    }
                }
            case .startPlanning:
                box.withValue { s in
                    guard s.planTimer == nil else { return }
                    let interval = self.settings.planInterval
                    s.planTimer = self.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
                        self.plan()
                    }
                }
            case .limitPrimary(let limit):
                box.withValue { $0.sinks[0] }?.setLimit(limit)
            case .cancel(let ids):
                for sink in box.withValue({ s in ids.compactMap { s.sinks[$0] } }) { sink.cancel() }
            case .stopKeepingData(let ids):
                for sink in box.withValue({ s in ids.compactMap { s.sinks[$0] } }) { sink.stopKeepingData() }
            case .releaseConnections(let count):
                for _ in 0..<count { observer.attemptReleasedConnection(attempt) }
            case .connectionRefused(let retryAfter):
                observer.attemptConnectionRefused(attempt, retryAfter: retryAfter)
            case let .shrink(id, limit):
                box.withValue { $0.sinks[id] }?.setLimit(limit)
            case let .extend(id, limit):
                box.withValue { $0.sinks[id] }?.extendLimit(to: limit)
            case let .open(id, range, url, validators, total):
                let config = PartialFileSink.Config(
                    url: url, role: .segment(range: range, total: total, validators: validators), id: id)
                let sink = PartialFileSink(eventLoop: eventLoop, config: config, download: self)
                box.withValue { $0.sinks[id] = sink }
                attempt.launchSegment(sink, url: url, eventLoop: eventLoop)
            case .plan:
                plan()
            case .flushForCheckpoint:
                for sink in box.withValue({ Array($0.sinks.values) }) { sink.flushForCheckpoint() }
                feed(.flushed)
            case .sync:
                let attempt = self.attempt, observer = self.observer, eventLoop = self.eventLoop
                writer.sync(checkpoint: { durable in
                    observer.attemptDidCheckpoint(attempt, durable: durable)
                }, synced: {
                    eventLoop.execute { self.feed(.synced) }
                })
            case .restartFromZero(let url):
                restartFromZero(url: url ?? attempt.url)
            case let .progress(delta, total, expected):
                let attempt = self.attempt, observer = self.observer
                writer.callback {
                    observer.attemptDidReceive(attempt, bytes: delta, totalBytes: total, totalBytesExpected: expected)
                }
            case .scheduleProgress(let at):
                let timer = eventLoop.scheduleTask(deadline: NIODeadline(seconds: at)) {
                    self.feed(.progressDue(now: NIODeadline.now().seconds))
                }
                box.withValue { $0.progressTimer = timer }
            case .finish(let finish):
                finalize(finish)
            }
        }
    }

    /// Asks the observer for the connections the planner wants now, then ticks the machine.
    private func plan() {
        let now = NIODeadline.now().seconds
        let ceiling = attempt.rateCeiling
        let stopRequested = attempt.isStopRequested
        let (wanted, positions) = box.withValue { s -> (Int, [Int: Int64]) in
            let positions = s.sinks.mapValues { $0.position }
            return (s.machine.connectionsWanted(now: now, positions: positions, ceiling: ceiling,
                                                stopRequested: stopRequested), positions)
        }
        var granted = 0
        while granted < wanted, observer.attemptWantsConnection(attempt) { granted += 1 }
        feed(.tick(now: now, positions: positions, ceiling: ceiling, granted: granted, stopRequested: stopRequested))
    }

    /// Another version answered while the download was split: what was written is discarded at once and one
    /// request asks `url` (the first response's, after redirects, through its own proxy) for the whole resource
    /// again (`didResumeAtOffset` says why).
    private func restartFromZero(url: String) {
        let discarded = writer.snapshot.writtenRanges.count
        let attempt = self.attempt, observer = self.observer
        writer.begin(truncate: true) { ok in
            if ok { observer.attemptDidCheckpoint(attempt, durable: ByteRanges()) }
        }
        let config = PartialFileSink.Config(url: url, role: .primary(.init(
            requestedOffset: 0, kept: discarded, restartReason: "resourceChanged")))
        let sink = PartialFileSink(eventLoop: eventLoop, config: config, download: self)
        box.withValue { s in
            s.planTimer?.cancel()
            s.planTimer = nil
            s.sinks[0] = sink
        }
        attempt.launchSegment(sink, url: url, eventLoop: eventLoop)
    }

    /// Stops the timers, finishes the file (truncated first when another version answered) and ends the attempt.
    private func finalize(_ finish: DownloadMachine.Finish) {
        box.withValue { s in
            s.checkpointTimer?.cancel()
            s.planTimer?.cancel()
            s.progressTimer?.cancel()
        }
        let attempt = self.attempt, observer = self.observer, promise = self.promise
        let stopRequested = attempt.isStopRequested
        if case .changed = finish { writer.begin(truncate: true) { _ in } }
        writer.finish([], at: 0, done: { snapshot in
            let (outcome, checkpoint) = PartialFileOutcome.conclude(finish, stopRequested: stopRequested,
                                                                    snapshot: snapshot)
            if let checkpoint { observer.attemptDidCheckpoint(attempt, durable: checkpoint) }
            promise.succeed(outcome)
        })
    }

    // MARK: - Helpers

    static func acceptsRanges(_ headers: [(String, String)]) -> Bool {
        guard let value = ResumeDecision.header("Accept-Ranges", in: headers) else { return false }
        return value.split(separator: ",").contains { String($0).trimmingSpaces.lowercased() == "bytes" }
    }
}
