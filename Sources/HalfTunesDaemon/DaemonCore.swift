import AsyncHTTPClient
import Crypto
import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol
import Logging
import NIOCore

/// One task as the daemon holds it: the journaled row, its lifecycle, and the transfer when running.
struct ManagedTask {
    var record: TaskRecord
    /// The uid of the session's owner (fixed: a session never changes hands).
    let owner: UInt32
    var machine: TaskStateMachine
    var bytesReceived: Int64
    /// An attempt was started and has not ended yet (the runner holds it: `DaemonCore.attempts`); a new one
    /// never starts before the old one has ended.
    var attemptInFlight = false
    /// What to do with the partial data once the transfer has stopped (after cancel).
    var discardPartialWhenStopped = false
    /// Uploads: progress of the current attempt.
    var bytesSent: Int64?
    var bytesExpectedToSend: Int64?
    /// A `running` download whose transfer ended and which is being verified or published: it holds no
    /// transfer slot (`TaskTable.running` leaves it out).
    var completing = false
    /// A `queued` task whose `earliestBeginDate` has not come yet: it is not in the queue until then
    /// (`DaemonState.deferIfEarly`, `TaskTable.dueBegins`).
    var deferredUntil: Double?
    /// Its row is still being inserted (`task.create` submits the insert and goes on): a queued one stays out of
    /// the queue, so nothing is transferred for a task the journal may never hold, until `createsJournaled`.
    var inserting = false
    /// Whether it stays out of the queue while `queued` (waiting for its begin date or for its row).
    var outOfQueue: Bool { deferredUntil != nil || inserting }
    /// The per-host limit's key (`HostKey`).
    var hostKey: String { HostKey.of(record.url) }

    var id: Int64 { record.id! }

    mutating func syncRecord(now: Double) {
        record.state = machine.state
        record.waitingReason = machine.waitingReason
        record.nextAttemptAt = machine.nextAttemptAt
        record.error = machine.error
        record.updatedAt = now
    }
}

extension ManagedTask {
    /// The task a journal row describes: the one place a task is rebuilt from its row (recovery, and a finished
    /// task read for a client). A finished data task or upload shows what it received, or sent, as journaled.
    init(row: TaskRecord, owner: UInt32) {
        let machine = TaskStateMachine(state: row.state, waitingReason: row.waitingReason,
                                       nextAttemptAt: row.nextAttemptAt, error: row.error,
                                       resourceDeadline: row.resourceDeadline)
        self.init(record: row, owner: owner, machine: machine, bytesReceived: row.bytesDurable)
        guard row.state.isTerminal else { return }
        if row.kind == TaskKind.data.rawValue || row.kind == TaskKind.upload.rawValue {
            bytesReceived = row.response?.bodyBytes ?? 0
        }
        if row.kind == TaskKind.upload.rawValue, row.state == .completed {
            bytesSent = row.bytesDurable // journaled at completion
            bytesExpectedToSend = row.bytesDurable
        }
    }
}

/// An attempt in flight as the runner holds it: the bridge to its transfer and the task's own bandwidth
/// bucket (its rate follows the task's `bandwidthLimit`).
struct LiveAttempt {
    let runtime: TaskRuntime
    let bandwidth: BandwidthBucket
    /// The proxy whose client the attempt leased, and for which uid (released when it ends).
    var proxy: ProxyServer? = nil
    var uid: UInt32 = 0
}

struct ManagedSession {
    var record: SessionRecord
    var lastEventSeq: Int64
    /// Journaled events not acknowledged yet (kept as events are journaled and acknowledged; the caps read it).
    var pendingEvents: Int
    /// Connections subscribed to its events now (the runner holds their outboxes).
    var subscribers = 0
}

/// The daemon's state, owned by one actor: sessions, tasks, the FIFO queue and event subscribers.
/// Journal writes happen here (and in checkpoints, from transfer queues); bytes never pass through here.
actor DaemonCore {
    var configuration: DaemonConfiguration
    let journal: Journal
    /// The direct HTTP client and one per proxy in use.
    let clients: HTTPClients
    let logger: Logger
    let clock: @Sendable () -> Double
    let startedAt: Double

    /// Sessions, unfinished tasks and the queue, changed only through `state.handle`, whose actions `run`
    /// carries out (the runner reads it freely).
    private(set) var state = DaemonState()
    /// The attempts in flight, by task: what the state only knows as `ManagedTask.attemptInFlight`.
    var attempts: [Int64: LiveAttempt] = [:]
    var subscribers: [String: [UInt64: Outbox]] = [:]
    /// What starts and watches the sessions' launch units (their `LaunchMachine`s are in the state).
    let launcher = UnitLauncher()
    /// Suspend and cancel requests waiting for a move in flight to end (`waitUntilMoved`).
    var moveWaiters: [Int64: [CheckedContinuation<Void, Never>]] = [:]
    /// The complete partial whose checksum was verified, held open for its move (the move publishes that very
    /// file, or fails if its path names another by then).
    var verifiedPartials: [Int64: OpenPartial] = [:]
    /// The bytes each uid's partial files hold, against `max-disk-per-uid` (DaemonCore+Disk.swift).
    let diskLedger: DiskLedger
    var rateMeter = ThroughputMeter()
    /// Upload request bodies sent (`DaemonStatus.uploadRate`).
    var uploadRateMeter = ThroughputMeter()
    var housekeeping: Task<Void, Never>?
    /// The one timer for every retry: it wakes at the earliest retry time `TaskTable` holds (`armRetryTimer`).
    var retryWake: (at: Double, task: Task<Void, Never>)?
    /// The daemon-wide bandwidth bucket every transfer is metered against (rate: the global limit).
    let globalBandwidth = BandwidthBucket(rate: 0)
    /// Limits from the configuration file and flags (nil until `loadLimits()`); reloads change them.
    var configuredLimits: DaemonLimits?
    /// Limits set with `daemon.setLimits`, kept in the journal; they win over `configuredLimits`.
    var limitOverrides = DaemonSetLimitsParams()
    /// Queue positions of every queued task, computed once while a whole list of tasks is described.
    var positionsMemo: [Int64: Int]?
    /// Authenticates resume data (`<state>/resume-data.key`).
    let resumeKey: SymmetricKey
    /// Extra connections of split downloads, per host (DaemonCore+Connections.swift).
    nonisolated let hostConnections: HostConnections

    init(configuration: DaemonConfiguration, journal: Journal, clients: HTTPClients, logger: Logger,
         resumeKey: SymmetricKey = SymmetricKey(size: .bits256),
         clock: @escaping @Sendable () -> Double = { Timestamp.now() }) {
        self.resumeKey = resumeKey
        self.configuration = configuration
        self.journal = journal
        self.clients = clients
        self.logger = logger
        self.clock = clock
        self.startedAt = clock()
        self.hostConnections = HostConnections()
        self.diskLedger = Self.diskLedger(for: configuration)
        self.state = DaemonState(limits: DaemonState.SlotLimits(maxConcurrent: configuration.maxConcurrent,
                                                                maxConnectionsPerHost: configuration.maxConnectionsPerHost))
        journal.onSubmittedWriteFailure { [logger] message in
            logger.error("journal write failed: \(message)")
        }
        hostConnections.onChange { [weak self] host in
            Task { await self?.connectionsChanged(host) }
        }
    }

    // MARK: - The state's inputs (the only writes of `state`)

    /// Feeds an input to the state at the current time; returns the actions to carry out (`run`).
    func feed(_ input: DaemonState.Input) -> [DaemonState.Action] {
        defer { updateHostAllowances() }
        return state.handle(input, now: clock())
    }

    /// Gives every host whose running or queued tasks changed its new allowance of extra connections (after
    /// each input: O(hosts changed), never all hosts; DaemonCore+Connections.swift).
    private func updateHostAllowances() {
        let changed = state.tasks.takeChangedHosts()
        guard !changed.isEmpty else { return }
        let limits = state.limits
        for host in changed {
            hostConnections.setAllowance(state.extraAllowance(host: host, limits: limits), host: host)
        }
    }

    /// Feeds an input and carries its actions out.
    func feedAndRun(_ input: DaemonState.Input) {
        run(feed(input))
    }

    // MARK: - Lookups

    /// The session (by its qualified name); another uid's session is "unknown", as if it did not exist.
    func session(_ identifier: String, for caller: Caller) throws(RPCError) -> ManagedSession {
        guard let s = state.sessions[identifier], caller.mayAccess(owner: s.record.uid) else {
            throw RPCError.unknownSession(identifier)
        }
        return s
    }

    /// The task (a finished one read from the journal, without blocking the core); a task of another uid's
    /// session is "unknown", as if it did not exist.
    func task(_ id: Int64, for caller: Caller) async throws(RPCError) -> ManagedTask {
        if let t = state.tasks[id] {
            guard caller.mayAccess(owner: t.owner) else { throw RPCError.unknownTask(id) }
            return t
        }
        guard let t = try await finishedTask(id), caller.mayAccess(owner: t.owner) else { throw RPCError.unknownTask(id) }
        return t
    }

    /// A task not in memory when asked, read from the journal without blocking the core: finished (its row is
    /// final), or in memory again by the time the read ends (nil when there is none).
    func finishedTask(_ id: Int64) async throws(RPCError) -> ManagedTask? {
        let record = try await nonblocking { try $0.loadTask(id) }
        return state.tasks[id] ?? record.flatMap(finishedTask)
    }

    func finishedTask(_ record: TaskRecord) -> ManagedTask? {
        guard record.state.isTerminal, let session = state.sessions[record.session] else { return nil }
        return ManagedTask(row: record, owner: session.record.uid)
    }

    func info(_ t: ManagedTask) -> TaskInfo {
        let r = t.record
        let position = queuePosition(t.id)
        return TaskInfo(
            id: t.id, session: r.session, kind: r.kind, url: r.url,
            currentURL: r.currentURL == r.url ? nil : r.currentURL,
            state: t.machine.state, waitingReason: t.machine.waitingReason,
            nextAttemptAt: t.machine.nextAttemptAt.map(Timestamp.format), queuePosition: position,
            bytesReceived: t.bytesReceived, bytesDurable: attempts[t.id]?.runtime.durableBytes ?? r.bytesDurable,
            bytesExpected: r.bytesExpected, destination: r.destination, location: r.location,
            error: t.machine.error, createdAt: Timestamp.format(r.createdAt), updatedAt: Timestamp.format(r.updatedAt),
            description: r.description, etag: r.etag, lastModified: r.lastModified, attempts: r.attempts,
            priority: r.priority, hold: state.hold(t, position: position), checksum: r.checksum, bandwidthLimit: r.bandwidthLimit,
            method: r.method, file: r.file, bytesSent: t.bytesSent, bytesExpectedToSend: t.bytesExpectedToSend,
            response: r.response, overwrite: r.overwrite ? true : nil, phase: state.completionPhase(t.id),
            maxConnections: r.maxConnections, connections: connections(of: t),
            earliestBeginDate: r.earliestBeginDate.map(Timestamp.format), suggestedFilename: r.suggestedFilename)
    }

    func sessionInfo(_ s: ManagedSession) -> SessionInfo {
        var counts: [String: Int] = [:]
        for (taskState, n) in state.tasks.counts(session: s.record.identifier) { counts[taskState.rawValue] = n }
        var configuration = s.record.configuration
        configuration.proxy = SessionProxy.presented(configuration.proxy) // never the password
        return SessionInfo(identifier: s.record.identifier, configuration: configuration,
                           state: s.record.state, createdAt: Timestamp.format(s.record.createdAt),
                           taskCounts: counts, lastEventSeq: s.lastEventSeq, ackedThrough: s.record.ackedThrough,
                           launch: launchInfo(s))
    }

    // MARK: - Status

    /// A reload's proxy rules: attempts started from now on use them (running ones keep theirs).
    func setProxyRules(_ rules: ProxyRules, problems: [String]) {
        guard rules != configuration.proxyRules || problems != configuration.proxyProblems else { return }
        configuration.proxyRules = rules
        configuration.proxyProblems = problems
        for problem in problems { logger.error("proxy variable not used: \(problem)") }
        logger.notice("proxy: \(rules.summary)", metadata: ["source": "\(rules.source)"])
    }

    /// The daemon's proxy rules for `daemon.status`.
    var proxyStatus: String {
        let rules = configuration.proxyRules
        return rules.isDirect ? "direct" : "\(rules.summary) (\(rules.source))"
    }

    func status() -> DaemonStatus {
        let counts = Dictionary(uniqueKeysWithValues: TaskState.allCases.map { ($0.rawValue, state.tasks.count(in: $0)) })
        let now = clock()
        return DaemonStatus(version: HalfTunes.version, pid: getpid(), uptimeSeconds: (now - startedAt),
                            tasks: counts, sessions: state.sessions.count, downloadRate: rateMeter.rate(now: now),
                            maxConcurrent: configuration.maxConcurrent, socketPath: configuration.socketPath,
                            stateDirectory: configuration.stateDirectory, limits: limits,
                            uploadRate: uploadRateMeter.rate(now: now), transfers: state.tasks.running.count,
                            connections: state.tasks.running.count + hostConnections.totalExtras,
                            conditions: state.reportedConditions, proxy: proxyStatus)
    }

    /// `SystemConditionsMonitor` saw other network or power conditions: sessions they stop wait, and those they
    /// let go on continue (`DaemonState.conditionsChanged`).
    func conditionsChanged(_ new: SystemConditions, serial: Int) {
        feedAndRun(.conditionsChanged(new, serial: serial))
    }
}
