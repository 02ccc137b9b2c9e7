// The runner of DaemonState: an actor that feeds it inputs, carries out its actions, and serves the RPC calls.
import AsyncHTTPClient
import Crypto
import Foundation
import HalfTunesCore
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol
import HalfTunesSystemd
import Logging
import NIOCore

/// The daemon's state, owned by one actor: sessions, tasks, the FIFO queue and event subscribers.
/// Journal writes are submitted here, checkpoints included; bytes never pass through here.
actor DaemonCore {
    var configuration: DaemonConfiguration
    nonisolated let services: CoreServices
    /// Sessions, unfinished tasks and the queue, changed only through `state.handle`, whose actions `run`
    /// carries out (the runner reads it freely).
    private(set) var state = DaemonState()
    var transfers = LiveTransfers()
    /// Each session's live subscribers, by connection (and each connection's sessions).
    var subscribers = Subscribers()
    var meters = Meters()
    var timers = CoreTimers()
    /// Authenticates resume data (`<state>/resume-data.key`).
    let resumeKey: SymmetricKey
    /// How inputs are fed: one at a time, each input's actions carried out before the next (`Feeding`).
    var feeding = Feeding()
    /// The record a fatal signal appends the running tasks to (`CrashRecord`); nil where none was opened (tests
    /// of the core in-process).
    var crashRecord: CrashRecord?
    /// Each uid's bytes in the journal, as last read (for `max-journal-per-uid`).
    var journalShares = JournalShares()

    nonisolated var journal: Journal { services.journal }
    nonisolated var clients: HTTPClients { services.clients }
    nonisolated var logger: Logger { services.logger }
    nonisolated var clock: @Sendable () -> Double { services.clock }
    nonisolated var diskLedger: DiskLedger { services.diskLedger }
    nonisolated var hostConnections: HostConnections { services.hostConnections }
    var attempts: [Int64: LiveAttempt] {
        get { transfers.attempts }
        _modify { yield &transfers.attempts }
    }

    init(configuration: DaemonConfiguration, journal: Journal, clients: HTTPClients, logger: Logger,
         resumeKey: SymmetricKey = SymmetricKey(size: .bits256),
         clock: @escaping @Sendable () -> Double = { Timestamp.now() }) {
        self.configuration = configuration
        self.resumeKey = resumeKey
        self.state = DaemonState(limits: DaemonState.SlotLimits(maxConcurrent: configuration.maxConcurrent,
                                                                maxConnectionsPerHost: configuration.maxConnectionsPerHost),
                                 caps: DaemonState.Caps(maxSessionsPerUID: configuration.maxSessionsPerUID,
                                                        maxTasksPerSession: configuration.maxTasksPerSession,
                                                        maxTasksPerUID: configuration.maxTasksPerUID,
                                                        maxPendingEventsPerSession: configuration.maxPendingEventsPerSession,
                                                        maxPendingEventsPerUID: configuration.maxPendingEventsPerUID,
                                                        maxResumeDataPerUID: configuration.maxResumeDataPerUID,
                                                        resumeDataLifetime: configuration.resumeDataLifetime),
                                 proxyRules: configuration.proxyRules, daemonUID: geteuid(),
                                 partialWriting: PartialWriting(checkpointInterval: configuration.checkpointInterval,
                                                                freeSpaceFloor: configuration.minFreeSpace))
        self.services = CoreServices(journal: journal, clients: clients, logger: logger, clock: clock, startedAt: clock(),
                                     launcher: UnitLauncher(),
                                     diskLedger: Self.diskLedger(for: configuration, exempt: state.diskExempt),
                                     hostConnections: HostConnections(),
                                     globalBandwidth: BandwidthBucket(rate: 0),
                                     netrc: configuration.netrcPath.map(NetrcFile.init(path:)),
                                     notifications: NotificationPoster(log: { [logger] in logger.notice("\($0)") }))
        if let path = InputLog.path { self.feeding.inputLog = InputLog(initial: state, reportPath: path) }
        journal.onSubmittedWriteFailure { [logger] message in
            logger.error("journal write failed: \(message)")
        }
        services.hostConnections.onChange { [weak self] host in
            Task { await self?.connectionsChanged(host) }
        }
    }

    /// The downloads directories' rules (DownloadRoots.swift), for this configuration.
    var downloadRoots: DownloadRoots { DownloadRoots(downloadsDirectory: configuration.downloadsDirectory) }

    // MARK: - The state's inputs (the only writes of `state`)

    /// Feeds an input to the state at the current time; returns the actions to carry out (`run`).
    func feed(_ input: DaemonState.Input) -> [DaemonState.Action] {
        // Never while another input's actions are carried out (`feedAndRun` makes such an input wait): checked in
        // every debug build, so the whole test suite holds the runner to it.
        assert(feeding.depth == 0, "an input was fed while another input's actions were being carried out: \(input)")
        let now = clock()
        let actions = state.handle(input, now: now)
        feeding.inputLog?.record(input, now: now, actions: actions)
        return actions
    }

    /// Feeds an input and carries its actions out. While another input's actions are being carried out (an action
    /// whose outcome is known at once: events numbered by a row's submission, a name chosen, a file looked at), the
    /// input waits until they all are (`run` feeds it then): an input's actions never interleave with another's.
    func feedAndRun(_ input: DaemonState.Input) {
        guard feeding.depth == 0 else { return feeding.waiting.append(input) }
        run(feed(input))
    }

    /// Runs `body` between an input's feed and the run of its actions: what `body` feeds waits for that run (which
    /// feeds it at its end).
    func holdingInputs(_ body: () -> Void) {
        feeding.depth += 1
        body()
        feeding.depth -= 1
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

    func finishedTask(_ record: TaskRecord) -> ManagedTask? { state.finishedTask(record) }

    func info(_ t: ManagedTask) -> TaskInfo {
        // Only a queued task is held. Swift copies the whole state to call `hold` here (seen in a profile: a list
        // of 50 finished tasks made 50 copies), so the call is made only for a task that can have a hold.
        let position = queuePosition(t.id)
        return Self.info(t, queuePosition: position,
                         hold: t.machine.state == .queued ? state.hold(t, position: position) : nil,
                         phase: state.completionPhase(t.id), connections: connections(of: t))
    }

    /// A task as clients see it, with what only the running daemon knows about it given.
    static func info(_ t: ManagedTask, queuePosition position: Int?, hold: TaskHold?, phase: TaskCompletionPhase?,
                     connections: Int?) -> TaskInfo {
        let r = t.record
        return TaskInfo(
            id: t.id, session: r.session, kind: r.kind, url: r.url,
            currentURL: r.currentURL == r.url ? nil : r.currentURL,
            state: t.machine.state, waitingReason: t.machine.waitingReason,
            nextAttemptAt: t.machine.nextAttemptAt.map(Timestamp.format), queuePosition: position,
            bytesReceived: t.bytesReceived, bytesDurable: r.bytesDurable,
            bytesExpected: r.bytesExpected, destination: r.destination, location: r.location,
            error: t.machine.error, createdAt: Timestamp.format(r.createdAt), updatedAt: Timestamp.format(r.updatedAt),
            description: r.description, etag: r.etag, lastModified: r.lastModified, attempts: r.attempts,
            priority: r.priority, hold: hold, checksum: r.checksum, bandwidthLimit: r.bandwidthLimit,
            method: r.method, file: r.file, bytesSent: t.bytesSent, bytesExpectedToSend: t.bytesExpectedToSend,
            response: r.response, overwrite: r.overwrite ? true : nil, phase: phase,
            maxConnections: r.maxConnections, connections: connections,
            earliestBeginDate: r.earliestBeginDate.map(Timestamp.format), suggestedFilename: r.suggestedFilename)
    }

    /// A finished task's `task.list` text, from its row alone: what `info` gives for a finished task the daemon
    /// no longer holds (in no queue, no completion, no attempt), without the response body. Made once per row, in
    /// the journal's read, and kept with it (`Journal.taskPage`).
    @Sendable static func listedText(finished record: TaskRecord) -> TaskInfoText {
        let t = ManagedTask(row: record, owner: 0) // the owner is not shown
        return TaskInfoText(info(t, queuePosition: nil, hold: nil, phase: nil, connections: nil).withoutResponseBody)
    }

    func sessionInfo(_ s: ManagedSession) -> SessionInfo {
        var counts: [String: Int] = [:]
        for (taskState, n) in state.tasks.counts(session: s.record.identifier) { counts[taskState.rawValue] = n }
        var configuration = s.record.configuration
        configuration.proxy = SessionProxy.presented(configuration.proxy) // never the password
        configuration.credentials = SessionCredentials.presented(configuration.credentials)
        return SessionInfo(identifier: s.record.identifier, configuration: configuration,
                           state: s.record.state, createdAt: Timestamp.format(s.record.createdAt),
                           taskCounts: counts, lastEventSeq: s.lastEventSeq, ackedThrough: s.record.ackedThrough,
                           launch: launchInfo(s))
    }

    // MARK: - Status

    /// A reload's proxy rules: attempts started from now on use them (running ones keep theirs). Always fed (the
    /// state changes nothing for the rules it has); logged when they or their problems changed.
    func setProxyRules(_ rules: ProxyRules, problems: [String]) {
        let changed = rules != configuration.proxyRules || problems != configuration.proxyProblems
        configuration.proxyRules = rules
        configuration.proxyProblems = problems
        feedAndRun(.proxyRulesChanged(rules))
        guard changed else { return }
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
        return DaemonStatus(version: HalfTunes.version, pid: getpid(), uptimeSeconds: (now - services.startedAt),
                            tasks: counts, sessions: state.sessions.count, downloadRate: meters.received.rate(now: now),
                            maxConcurrent: limits.maxConcurrent, socketPath: configuration.socketPath,
                            stateDirectory: configuration.stateDirectory, limits: limits,
                            uploadRate: meters.sent.rate(now: now), transfers: state.tasks.running.count,
                            connections: state.tasks.running.count + hostConnections.totalExtras,
                            conditions: state.reportedConditions, proxy: proxyStatus)
    }

    /// `SystemConditionsMonitor` saw other network or power conditions: sessions they stop wait, and those they
    /// let go on continue (`DaemonState.conditionsChanged`).
    func conditionsChanged(_ new: SystemConditions, serial: Int) {
        feedAndRun(.conditionsChanged(new, serial: serial))
    }
}

// MARK: - One connection's requests on the core: made in order, isolated to the core (no hop each), creates together.

extension DaemonCore {
    /// Runs a connection's prepared requests in order and hands each answer on. The requests arrive in the
    /// bursts the socket delivered them; within a burst, consecutive task.create requests are made together
    /// (`createTasks`: one journal transaction), everything else one by one. The stream is read on the core,
    /// so no hop is made between requests; after every `yieldEvery` requests the core lets other work in.
    func serve(_ requests: AsyncStream<[(RPCRouter.Prepared, Int)]>, router: RPCRouter,
               answer: @Sendable (RPCRouter.Answer, Int) -> Void) async {
        var served = 0
        for await burst in requests {
            var i = 0
            while i < burst.count {
                guard case .create = burst[i].0 else {
                    answer(await router.run(burst[i].0, on: self), burst[i].1)
                    i += 1
                    served += 1
                    if served % Self.yieldEvery == 0 { await Task.yield() }
                    continue
                }
                var run: [(id: RPCID?, bytes: Int, params: TaskCreateParams, caller: Caller)] = []
                while i < burst.count, run.count < Self.maxCreatesTogether, case .create(let id, let p, let caller) = burst[i].0 {
                    run.append((id, burst[i].1, p, caller))
                    i += 1
                }
                let results = await createTasks(run.map { ($0.params, $0.caller) })
                for (request, result) in zip(run, results) {
                    answer(RPCRouter.answer(id: request.id, result), request.bytes)
                }
                served += run.count
                await Task.yield()
            }
        }
    }

    static let yieldEvery = 16
    /// The most task.create requests journaled in one transaction.
    static let maxCreatesTogether = 64
}

// MARK: - The queue: starting tasks within the limits, fairly between users, queue positions, and task.move.

extension DaemonCore {
    /// Starts queued tasks while the limits allow, fairly between users (`DaemonState.grantSlots`).
    func pump() {
        feedAndRun(.grantSlots)
    }

    /// A queued task's place in the shared order (1 = next); nil for any other state. O(users with queued tasks
    /// × log n, plus a count per `SortedRun` chunk before it): worked out, not walked (`RunQueue.position`).
    func queuePosition(_ id: Int64) -> Int? {
        state.tasks.queue.position(of: id, running: state.tasks.runningByOwner, lastServed: state.lastServed)
    }

    /// `task.move`: the front or back of its priority class. A queued task moves at once; a suspended or
    /// waiting one gets that place when it is queued again.
    func moveTask(_ p: TaskMoveParams, caller: Caller) async throws(RPCError) -> TaskInfo {
        let t = try await task(p.id, for: caller)
        let actions = try edit(t, DaemonState.TaskEdit(move: p.to))
        logger.info("task moved", metadata: ["task": "\(p.id)", "to": "\(p.to.rawValue)"])
        run(actions)
        return info(try await task(p.id, for: caller))
    }
}

// MARK: - Split downloads' extra connections in the core: each host's allowance follows its tasks, and what is in use goes back to the state's per-host limit.

extension DaemonCore {
    /// The extra connections in use to `host` changed (reported by `HostConnections`, off the core): the
    /// state's per-host limit counts them.
    func connectionsChanged(_ host: String) {
        feedAndRun(.connectionsChanged(host: host, extras: hostConnections.extras(host)))
    }

    /// The connections a running task uses now (1 plus the extras it holds), nil when it has no transfer.
    func connections(of t: ManagedTask) -> Int? {
        guard attempts[t.id] != nil, t.machine.state == .running, !t.completing else { return nil }
        return 1 + hostConnections.extras(t.hostKey, task: t.id)
    }
}
