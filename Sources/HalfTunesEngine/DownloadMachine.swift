// What a download attempt does when its requests start and end, on its timer and on a shed: a pure state machine.
import HalfTunesCore
import HalfTunesProtocol

/// The decisions of one download attempt, over all its requests (segment 0 is the first; further ones are the
/// `SegmentPlanner`'s): whether the download may be split, what a request's end means for the others, which
/// requests a shed stops, how many connections it holds beyond the first, when it starts again from byte 0
/// (another version answered, once per attempt), when the task hears of the bytes received (at most one report
/// per `progressInterval`, a trailing one after a stall, the rest before the end) and how it ends.
/// `SegmentedDownload` feeds it inputs and
/// carries out its actions (timers, requests, the partial file, the observer); nothing here does I/O or reads
/// a clock: times are inputs, in seconds on any monotonic clock.
///
/// Connections beyond the first are the observer's to grant. Before a tick the runner asks
/// `connectionsWanted` how many the tick would open, asks the observer for up to that many, and passes the
/// number granted with `.tick`: the planner opens no more than that, and any left unused are released.
struct DownloadMachine: Sendable {
    struct Settings: Sendable, Equatable {
        var maxConnections: Int
        /// Seconds between two progress reports.
        var progressInterval: Double = 1
    }

    /// What the runner knows when one request of the attempt ended.
    struct RequestEnd: Sendable, Equatable {
        /// The engine's decision on the response, when it refused it or it needs no body.
        var decided: PartialFileSink.Decided?
        var start: ResponseStart?
        /// Absolute offset where the response's body should have ended, when the response said.
        var expectedEnd: Int64?
        /// The idle timeout failed the request.
        var timedOut: Bool
        var finalURL: String
        /// Every byte below this offset, from where the request began, was received and submitted for writing.
        var position: Int64
        /// The request has every byte up to its limit (a segment's end, or where the planner cut it).
        var reachedLimit: Bool
        /// The whole response arrived.
        var responseEnded: Bool
        /// The transport's error, classified (nil: the request succeeded).
        var transportFailure: TransportFailure?
    }

    struct TransportFailure: Sendable, Equatable {
        var error: TaskError
        var isTransient: Bool
    }

    enum Input: Sendable, Equatable {
        /// The first request is under way.
        case launched
        /// The first request's response was accepted (from `start.offset`); `acceptsRanges`: it said
        /// `Accept-Ranges: bytes`.
        case responseStarted(ResponseStart, acceptsRanges: Bool, now: Double)
        /// Request `id` ended. `stopRequested`: the attempt was asked to stop.
        case ended(id: Int, RequestEnd, stopRequested: Bool)
        /// A write to the partial file failed.
        case fileFailed
        /// The observer takes `count` connections back.
        case shed(count: Int)
        /// The planning timer fired (or an end asked for `.plan`): `positions` of the running requests,
        /// `granted` connections the observer gave for it.
        case tick(now: Double, positions: [Int: Int64], ceiling: Double?, granted: Int, stopRequested: Bool)
        /// The attempt ended before its first request was sent.
        case abandoned(id: Int, TaskError?)
        /// A request submitted a write to the file.
        case wrote
        /// The checkpoint timer fired.
        case checkpointDue
        /// Every request handed its pending bytes to the writer (after `.flushForCheckpoint`).
        case flushed
        /// The checkpoint's fsync ended (its ranges were reported).
        case synced
        /// A request received `bytes` (within its range) at `now`.
        case received(bytes: Int64, now: Double)
        /// The progress timer of `.scheduleProgress` fired.
        case progressDue(now: Double)
    }

    enum Action: Sendable, Equatable {
        /// Start the checkpoint timer.
        case startCheckpoints
        /// Start the planning timer (the download may be split).
        case startPlanning
        /// The first request stops at this offset.
        case limitPrimary(Int64)
        /// Stop these requests now; nothing more of them is written.
        case cancel([Int])
        /// Stop these requests now, keeping what they received.
        case stopKeepingData([Int])
        /// Give back this many connections granted beyond the first.
        case releaseConnections(Int)
        /// The server refused a connection (429, 503).
        case connectionRefused(retryAfter: Double?)
        case shrink(id: Int, limit: Int64)
        case extend(id: Int, limit: Int64)
        /// Start request `id` for exactly `range` of the version `validators` names (length `total`).
        case open(id: Int, range: Range<Int64>, url: String, validators: Validators, total: Int64)
        /// Ask the observer for connections and tick now (`connectionsWanted`, then `.tick`).
        case plan
        /// Every running request hands its pending bytes to the writer; then feed `.flushed`.
        case flushForCheckpoint
        /// fsync the file and report its durable ranges (a checkpoint); feed `.synced` when it ended.
        case sync
        /// Another version answered: truncate the file and run one request for the whole resource again, at `url`
        /// (where the first response came from, after its redirects; nil: the attempt's URL).
        case restartFromZero(url: String?)
        /// Tell the observer: `delta` more bytes, `total` in the file of `expected` (when known).
        case progress(delta: Int64, total: Int64, expected: Int64?)
        /// Feed `.progressDue` at `at` (seconds): bytes received before a stall are reported after one interval.
        case scheduleProgress(at: Double)
        /// Stop the timers, finish the file, and end the attempt as `Finish` says (the last progress before it).
        case finish(Finish)
    }

    /// How the attempt ends, once the file is finished (`DownloadOutcome.conclude`).
    enum Finish: Sendable, Equatable {
        /// Another version answered again after the restart (or while stopping): the file is truncated.
        case changed(reason: String, url: String)
        /// A split download: complete when every byte of `total` is durable. `keepPrefixOnly`: a further
        /// request was not served as asked, so only the part from byte 0 is kept.
        case segmented(total: Int64, start: ResponseStart, lastFailure: TransferFailure?, keepPrefixOnly: Bool)
        /// A download that was never split ends as its one request did.
        case single(RequestEnd)
        /// Nothing was received, or the first request was never sent (`error`: why).
        case nothing(TaskError?)
    }

    let settings: Settings
    /// What the file kept from earlier attempts.
    let kept: ByteRanges
    /// The requests running; the first counts from the start (its response may come before `launched`).
    private(set) var running: Set<Int> = [0]
    private(set) var planner: SegmentPlanner?
    private(set) var start: ResponseStart?
    private var primaryEnd: RequestEnd?
    private var lastFailure: TransferFailure?
    /// Another version of the resource answered: why.
    private(set) var changed: String?
    /// A further request was not served as asked: the durable data kept is the part from byte 0 only.
    private var unsplittable = false
    /// The download already started again from byte 0 after another version answered.
    private(set) var restarted = false
    private var fileFailed = false
    private var launched = false
    private(set) var finishing = false
    /// Connections granted beyond the first, not given back yet.
    private(set) var extrasHeld = 0
    /// Requests stopped because the observer took their connection back.
    private var shed: Set<Int> = []
    /// A checkpoint's fsync is under way; bytes were written since the last one.
    private(set) var syncInFlight = false
    private(set) var unsynced = false
    /// Bytes the file has, as reported (the durable ones kept, plus what arrived since).
    private(set) var progress: ProgressPacer
    /// A `.scheduleProgress` is pending.
    private var progressScheduled = false

    init(settings: Settings, kept: ByteRanges) {
        self.settings = settings
        self.kept = kept
        self.progress = ProgressPacer(interval: settings.progressInterval, total: kept.count, now: 0)
    }

    /// The expected length of the resource, once a response said.
    var expectedTotal: Int64? { start?.expectedTotal }

    mutating func handle(_ input: Input) -> [Action] {
        var actions = step(input)
        // Whatever was received and not yet reported is reported before the attempt ends.
        if let end = actions.firstIndex(where: { if case .finish = $0 { true } else { false } }),
           let report = progress.flush(now: progress.lastReportAt) {
            actions.insert(progressAction(report), at: end)
        }
        return actions
    }

    private mutating func step(_ input: Input) -> [Action] {
        switch input {
        case .launched:
            guard !finishing, primaryEnd == nil, !launched else { return [] }
            launched = true
            return [.startCheckpoints]
        case let .responseStarted(start, acceptsRanges, now):
            return responseStarted(start, acceptsRanges: acceptsRanges, now: now)
        case let .ended(id, end, stopRequested):
            return ended(id, end, stopRequested: stopRequested)
        case .fileFailed:
            fileFailed = true
            return running.isEmpty ? [] : [.cancel(running.sorted())]
        case .shed(let count):
            let candidates = running.subtracting(shed).sorted(by: >)
            let ids = Array(candidates.prefix(min(count, max(0, candidates.count - 1))))
            shed.formUnion(ids)
            return ids.isEmpty ? [] : [.stopKeepingData(ids)]
        case let .tick(now, positions, ceiling, granted, stopRequested):
            return tick(now: now, positions: positions, ceiling: ceiling, granted: granted,
                        stopRequested: stopRequested)
        case let .abandoned(id, error):
            running.remove(id)
            guard !finishing else { return [] }
            finishing = true
            return [.finish(.nothing(error))]
        case .wrote:
            unsynced = true
            return []
        case .checkpointDue:
            // One checkpoint at a time, and none once the attempt is ending (its end makes the last one).
            guard !finishing, !syncInFlight, !running.isEmpty else { return [] }
            return [.flushForCheckpoint]
        case .flushed:
            guard !finishing, !syncInFlight, unsynced else { return [] }
            unsynced = false
            syncInFlight = true
            return [.sync]
        case .synced:
            syncInFlight = false
            return []
        case let .received(bytes, now):
            guard bytes > 0, !finishing else { return [] }
            if let report = progress.add(bytes, now: now) { return [progressAction(report)] }
            return scheduleProgress()
        case .progressDue(let now):
            progressScheduled = false
            guard !finishing, progress.isBehind else { return [] }
            if now < progress.nextReportAt { return scheduleProgress() }
            return progress.flush(now: now).map { [progressAction($0)] } ?? []
        }
    }

    /// A trailing report one interval after the last, unless one is pending.
    private mutating func scheduleProgress() -> [Action] {
        guard !progressScheduled else { return [] }
        progressScheduled = true
        return [.scheduleProgress(at: progress.nextReportAt)]
    }

    private func progressAction(_ report: ProgressPacer.Report) -> Action {
        let expected = expectedTotal
        return .progress(delta: report.delta, total: expected.map { min(report.total, $0) } ?? report.total,
                         expected: expected)
    }

    /// How many connections beyond the first a tick with these inputs would ask for (asking costs nothing).
    func connectionsWanted(now: Double, positions: [Int: Int64], ceiling: Double?, stopRequested: Bool) -> Int {
        guard mayPlan(stopRequested: stopRequested), var planner else { return 0 }
        for (id, position) in positions { planner.progress(id, position: position) }
        var asked = 0
        _ = planner.tick(now: now, ceiling: ceiling, mayOpen: {
            asked += 1
            return true
        })
        return asked
    }

    // MARK: - Inputs

    private mutating func responseStarted(_ start: ResponseStart, acceptsRanges: Bool, now: Double) -> [Action] {
        self.start = start
        progress.restart(at: start.offset > 0 ? kept.count : 0, now: now)
        // Only a response that appends keeps what the file had; any other starts the file anew.
        let keptNow = start.offset > 0 ? kept : ByteRanges()
        guard let total = start.expectedTotal, total > 0, start.validators.ifRangeValue != nil,
              start.status == 206 || acceptsRanges else { return [] }
        let gapsAfter = keptNow.ranges.contains { $0.lowerBound > start.offset }
        guard settings.maxConnections > 1 || gapsAfter else { return [] }
        let planner = SegmentPlanner(settings: .init(maxConnections: settings.maxConnections), total: total,
                                     kept: keptNow, primaryFrom: start.offset, now: now)
        self.planner = planner
        var actions: [Action] = [.startPlanning]
        if planner.primaryLimit < total { actions.append(.limitPrimary(planner.primaryLimit)) }
        return actions
    }

    private mutating func ended(_ id: Int, _ end: RequestEnd, stopRequested: Bool) -> [Action] {
        running.remove(id)
        var actions: [Action] = []
        if id == 0 { primaryEnd = end }
        // The first response named another version than the kept bytes': they go, and (once per attempt) the
        // download asks for the whole resource again.
        if id == 0, case .changed(let reason)? = end.decided { changed = reason }
        let released = releaseExtras()
        if released > 0 { actions.append(.releaseConnections(released)) }
        guard var planner else {
            if running.isEmpty { actions += conclude(stopRequested: stopRequested) }
            return actions
        }
        let kind = classify(id, end)
        if kind == .unsplittable { unsplittable = true }
        if kind == .refused { actions.append(.connectionRefused(retryAfter: lastFailure?.retryAfter)) }
        actions += planner.ended(id, position: end.position, kind).map(Self.action)
        self.planner = planner
        if changed != nil || fileFailed || stopRequested {
            if changed != nil, !running.isEmpty { actions.append(.cancel(running.sorted())) }
            if running.isEmpty { actions += conclude(stopRequested: stopRequested) }
            return actions
        }
        // The last request ended short: the attempt ends (the task's retry goes on later), rather than asking
        // again at once what was just refused.
        if kind != .reachedLimit, kind != .shed, running.isEmpty {
            return actions + conclude(stopRequested: stopRequested)
        }
        if !planner.isComplete {
            actions.append(.plan)
        } else if running.isEmpty {
            actions += conclude(stopRequested: stopRequested)
        }
        return actions
    }

    private mutating func tick(now: Double, positions: [Int: Int64], ceiling: Double?, granted: Int,
                               stopRequested: Bool) -> [Action] {
        var budget = granted
        var actions: [Action] = []
        if mayPlan(stopRequested: stopRequested), var planner, let start {
            for (id, position) in positions { planner.progress(id, position: position) }
            let planned = planner.tick(now: now, ceiling: ceiling, mayOpen: {
                guard budget > 0 else { return false }
                budget -= 1
                return true
            })
            extrasHeld += granted - budget
            self.planner = planner
            for action in planned {
                if case let .open(id, range) = action {
                    running.insert(id)
                    actions.append(.open(id: id, range: range, url: start.finalURL, validators: start.validators,
                                         total: planner.total))
                } else {
                    actions.append(Self.action(action))
                }
            }
        }
        if budget > 0 { actions.append(.releaseConnections(budget)) }
        if running.isEmpty, !finishing { actions += conclude(stopRequested: stopRequested) }
        return actions
    }

    private func mayPlan(stopRequested: Bool) -> Bool {
        !finishing && changed == nil && !fileFailed && !stopRequested
    }

    // MARK: - The end

    /// Every request ended: start again from byte 0 once if another version answered, else finish.
    private mutating func conclude(stopRequested: Bool) -> [Action] {
        guard !finishing else { return [] }
        if changed != nil, !restarted, !stopRequested {
            let url = start?.finalURL
            restarted = true
            changed = nil
            planner = nil
            primaryEnd = nil
            start = nil
            lastFailure = nil
            unsplittable = false
            running = [0]
            return [.restartFromZero(url: url)]
        }
        finishing = true
        if let changed {
            return [.finish(.changed(reason: changed, url: start?.finalURL ?? ""))]
        }
        if let planner, let start {
            return [.finish(.segmented(total: planner.total, start: start, lastFailure: lastFailure,
                                       keepPrefixOnly: unsplittable))]
        }
        if let primaryEnd { return [.finish(.single(primaryEnd))] }
        return [.finish(.nothing(nil))]
    }

    /// Connections granted beyond the first that no request uses any more: how many to give back.
    private mutating func releaseExtras() -> Int {
        let excess = extrasHeld - max(0, running.count - 1)
        guard excess > 0 else { return 0 }
        extrasHeld -= excess
        return excess
    }

    /// How a request's end counts for the planner; remembers failures and a changed resource.
    private mutating func classify(_ id: Int, _ end: RequestEnd) -> SegmentPlanner.End {
        let wasShed = shed.remove(id) != nil
        if end.reachedLimit { return .reachedLimit }
        if wasShed {
            if case .segment(.changed)? = end.decided {} else { return .shed }
        }
        switch end.decided {
        case .segment(.changed(let reason))?:
            changed = reason
            return .failed
        case .segment(.unsplittable)?:
            return .unsplittable
        case .segment(.refused(let error, let retryAfter))?:
            lastFailure = TransferFailure(error: error, isTransient: true, retryAfter: retryAfter, durable: ByteRanges())
            return .refused
        case .segment(.failed(let error, let transient))?:
            lastFailure = TransferFailure(error: error, isTransient: transient, durable: ByteRanges())
            return .failed
        case .fail(let error, let transient, let retryAfter)?:
            lastFailure = TransferFailure(error: error, isTransient: transient, retryAfter: retryAfter,
                                          durable: ByteRanges())
            return .failed
        default:
            break
        }
        if end.transportFailure == nil, end.responseEnded { return .reachedLimit }
        if end.timedOut {
            lastFailure = TransferFailure(error: ErrorMapping.idleTimeout(end.finalURL), isTransient: true,
                                          durable: ByteRanges())
        } else if let failure = end.transportFailure {
            lastFailure = TransferFailure(error: failure.error, isTransient: failure.isTransient, durable: ByteRanges())
        }
        return .failed
    }

    private static func action(_ planned: SegmentPlanner.Action) -> Action {
        switch planned {
        case let .shrink(id, limit): return .shrink(id: id, limit: limit)
        case let .extend(id, limit): return .extend(id: id, limit: limit)
        case let .open(id, range):
            // Opens are turned into `.open` with the version by `tick`; the planner's `ended` never opens.
            preconditionFailure("SegmentPlanner opened segment \(id) for \(range) outside a tick")
        }
    }
}
