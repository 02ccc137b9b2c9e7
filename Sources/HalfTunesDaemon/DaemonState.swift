// The core's state as a value: sessions, unfinished tasks and the queue; inputs in, actions out, no I/O.
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

/// What the daemon knows, held by `DaemonCore` (the runner) and changed only through `handle(_:now:)` for
/// the task lifecycle: an input changes the state and returns the actions the runner carries out (journal,
/// start or stop an attempt, remove a partial file, arm the retry timer). Nothing here touches a file, a
/// socket or the clock, so the queue, the limits, retries and resource deadlines are unit-tested in virtual
/// time (`DaemonStateTests`).
struct DaemonState {
    var sessions: [String: ManagedSession] = [:]
    /// The unfinished tasks (and finished ones still stopping a transfer or publishing) with their indexes.
    var tasks = TaskTable()
    /// The next queue order given to a task that enters the back of the queue (a create reads it and `created`
    /// moves past the places its tasks took).
    var nextQueueOrder: Int64 = 1
    /// When each uid was last given a transfer slot (a serial number): between users with as many transfers
    /// running, the one served longest ago goes first (`RunQueue.next`).
    var lastServed: [UInt32: Int64] = [:]
    var servedSerial: Int64 = 0
    /// Journaled, unacknowledged events per uid, over all its sessions.
    var pendingEventsByUID: [UInt32: Int] = [:]
    /// Once set, nothing starts and nothing retries.
    var shuttingDown = false
    /// Downloads between "every byte is durable" and completed/failed (DaemonState+Completion.swift): a task
    /// in memory costs nothing more.
    var completions: [Int64: Completion] = [:]
    /// Connections in use per host beyond one per running task (split downloads; `HostConnections` grants
    /// them and reports every change as `connectionsChanged`): the per-host limit counts them.
    var extrasByHost: [String: Int] = [:]
    /// The network and power conditions (`SystemConditionsMonitor`); sessions' transfers are gated by them
    /// (`ConditionsGate`, DaemonState+Conditions.swift).
    var conditions: SystemConditions { reportedConditions ?? .assumed }
    /// What `SystemConditionsMonitor` last reported (nil before its first report), and that report's serial: a
    /// report older than the last one taken (it arrived late) changes nothing.
    var reportedConditions: SystemConditions?
    var conditionsSerial = 0
    /// The relaunch machine of each session with a `launchUnit` (DaemonState+Launch.swift).
    var launches: [String: LaunchMachine] = [:]
    /// When finished tasks were last swept, and whether that sweep left work behind (DaemonState+Retention.swift);
    /// when resume data last expired.
    var lastRetentionSweep: Double = 0
    var retentionBacklog = false
    var lastResumeDataPrune: Double = 0
    /// Resume data each uid keeps (journaled tokens, each holding a partial file), and cancels making some now:
    /// `max-resume-data-per-uid` bounds their sum (`resumeDataHeld`).
    var resumeDataKept: [UInt32: Int] = [:]
    var resumeDataInFlight: [UInt32: Int] = [:]

    /// The daemon-wide limits a slot is granted within (the session's own `maxConcurrent` is in `sessions`).
    struct SlotLimits: Equatable, Sendable {
        var maxConcurrent: Int
        var maxConnectionsPerHost: Int
    }
    /// The limits slots are granted within (`limitsChanged`; the runner feeds its configuration's at start).
    private(set) var limits: SlotLimits

    init(limits: SlotLimits = SlotLimits(maxConcurrent: 6, maxConnectionsPerHost: 6)) {
        self.limits = limits
    }

    enum Input {
        /// Tasks were journaled as created (suspended, or queued with their place): they join the state and
        /// the queued ones may start.
        case created([ManagedTask])
        /// A lifecycle input for one task (`task.resume`, `task.suspend`, `task.cancel`). `extra` events go just
        /// before `didComplete`. Its state machine may refuse it: then the only action is `refused`.
        case task(Int64, TaskStateMachine.Input, extra: [EventPayload] = [])
        /// Slots may be free: start queued tasks while the limits allow, fairly between users.
        case grantSlots
        /// The daemon-wide limits changed (and at start): kept, and slots granted within them.
        case limitsChanged(SlotLimits)
        /// The retry timer fired: every waiting task whose time has come retries.
        case retryTimerFired
        /// The once-a-second tick: pending tasks whose resource deadline has passed fail (read from the
        /// deadline index, not a walk over the tasks).
        case clockTick
        /// A completion's result from off the core: a digest, the name the runner chose, how a move went.
        case completion(Int64, attempt: Int, CompletionMachine.Input)
        /// Recovery found the journaled publish intent of a task and `recovery` on the file system.
        case recoveredCompletion(Int64, FilePublisher.Recovery, totalBytes: Int64)
        /// A task's attempt ended (`jitterSample`, 0..<1, spreads the retry times of transient failures).
        case attemptEnded(Int64, AttemptOutcome, jitterSample: Double)
        /// What a task's attempt in flight reports (DaemonState+Progress.swift).
        case attemptProgress(Int64, Progress)
        /// A task's row changed outside its lifecycle (`task.move`, `task.update`): journaled, and slots granted.
        case edited(Int64, TaskEdit)
        /// A new session was journaled.
        case sessionOpened(ManagedSession)
        /// A session's configuration changed (journaled): a new `maxConcurrent` applies at once.
        case sessionConfigured(String, SessionConfiguration)
        /// `session.invalidate` (DaemonState+Sessions.swift): its tasks are canceled as asked, and it takes
        /// nothing new.
        case sessionInvalidating(String, cancelTasks: Bool)
        /// An invalidated session's rows were deleted: it leaves the state with its tasks.
        case sessionRemoved(String)
        /// The session's journaled events through `lastSeq` (`count` of them) were stored.
        case eventsJournaled(session: String, lastSeq: Int64, count: Int)
        /// The session's events through `through` were acknowledged and `pruned` from the journal.
        case eventsAcknowledged(session: String, through: Int64, pruned: Int, droppedBodies: [Int64])
        /// Recovery: a journaled session with its unacknowledged events (fed before its tasks).
        case sessionRestored(ManagedSession)
        /// Recovery: a journaled unfinished task (or one whose publish a crash interrupted), in any order: it
        /// keeps its place in the queue, and tasks queued later take places after every journaled one.
        /// `partialLength`: the partial file's length on disk, when `partialMayBeShort` said to look (nil: not
        /// looked at, or no file); durable ranges past it were lost (a disk that lost writes, a file cut) and are
        /// dropped, so the transfer resumes from what is there.
        case taskRestored(ManagedTask, partialLength: Int64? = nil)
        /// Recovery: how many finished tasks (in the journal only) each session has, per state.
        case finishedTasksCounted([String: [TaskState: Int]])
        /// Recovery fed every session and task: invalidations that were waiting for nothing more finish.
        case restoreFinished
        /// Finished tasks of a session were deleted from the journal (their retention passed).
        case finishedTasksDeleted(String, [TaskState: Int])
        /// Shutdown began: nothing starts and nothing retries from now on.
        case shutdownBegan
        /// The extra connections in use to `host` (beyond one per running task) are now `extras`: fewer may
        /// let a task queued for the host start.
        case connectionsChanged(host: String, extras: Int)
        /// The network or power conditions changed (DaemonState+Conditions.swift).
        case conditionsChanged(SystemConditions, serial: Int)
        /// The session's live subscribers are now `count` (subscribed, or a connection left): with none, waiting
        /// events start its launch unit.
        case subscribersChanged(String, count: Int)
        /// The service manager answered the start of the session's launch unit `unit` (nil: started).
        case launchStartAnswered(String, unit: String, error: String?)
        /// The session's started launch unit ended (its service `Result` and main exit status).
        case launchUnitEnded(String, unit: String, result: String, exitStatus: Int32)
        /// The resume data a uid keeps changed by `kept` (tokens journaled, redeemed, expired, deleted with their
        /// session; at start, what the journal holds) and the cancels making some by `inFlight`.
        case resumeDataChanged(uid: UInt32, kept: Int, inFlight: Int)
        /// A sweep (`sweepRetention`) ended; `backlog`: it stopped at its budget with finished tasks left to delete
        /// (the next tick sweeps again).
        case retentionSwept(backlog: Bool)
        /// The first response named a download the client named no file for (the runner chose the free path).
        case responseNamed(Int64, destination: String, suggestedFilename: String)
    }

    /// What an attempt in flight reports, in order.
    enum Progress {
        /// A download's response was accepted.
        case started(ResponseStart)
        /// Response body bytes (a download's totals are positions in the file).
        case received(delta: Int64, total: Int64, expected: Int64?)
        /// An upload's file was opened: this attempt sends `bytes` bytes.
        case bodyOpened(bytes: Int64)
        /// Part of an upload's body was sent.
        case sent(delta: Int64, total: Int64, expected: Int64?)
    }

    enum Action: Equatable {
        /// The task's state machine refused the `task` input: nothing changed (the caller answers with it).
        case refused(Refused)
        /// Journal the task's row with these events in one transaction, then deliver them live. While the
        /// task's attempt is in flight and the task unfinished, the row carries the attempt's durable length,
        /// which only the runner knows (checkpoints raise it off the core).
        case journal(TaskRecord, [EventPayload])
        /// Deliver a live event that is never journaled (progress) to the session's subscribers.
        case deliver(session: String, task: Int64, EventPayload)
        /// Start an attempt of the task (it is `running` and holds a slot).
        case startAttempt(Int64)
        /// Stop the task's attempt in flight (its outcome comes back as an input).
        case stopAttempt(Int64)
        /// Remove the task's partial file (nothing is writing it).
        case removePartial(path: String)
        /// Wake the retry timer at this time (or keep one that wakes earlier).
        case armRetryTimer(at: Double)
        /// Compute the digest of the task's partial off the core; feed it back as `completion(.digestComputed)`.
        case computeDigest(Int64, attempt: Int, path: String)
        /// Choose a free name to publish at (it looks at the file system); feed it back as
        /// `completion(.nameChosen)`.
        case chooseName(Int64, attempt: Int, avoiding: Set<String>)
        /// Sync the journal (the intent), then move the partial to `location` off the core; feed the outcome
        /// back as `completion(.moveEnded)`.
        case move(Int64, attempt: Int, partial: String, location: String, replacing: Bool, partialIsDurable: Bool)
        /// The task's completion ended (published at `location`, or failed): whoever waits for its move goes on.
        case completionEnded(Int64, location: String?, error: TaskError?)
        /// Delete this invalidated session (its tasks have finished and no transfer of it is stopping): its
        /// resume data, its journal rows; then feed `sessionRemoved` and tell its subscribers.
        case finishInvalidation(session: String)
        /// Journal the session's launch record (`sessions.launch`; nil clears it).
        case recordLaunch(session: String, SessionLaunchRecord?)
        /// Ask the service manager to start the session's launch unit (after `failures` failed starts in a row);
        /// feed its answer as `launchStartAnswered`.
        case startUnit(session: String, unit: String, failures: Int)
        /// Watch the started unit until it ends; feed `launchUnitEnded`.
        case watchUnit(session: String, unit: String)
        /// Delete the finished tasks these sweeps allow from the journal, within the runner's budget; feed
        /// `finishedTasksDeleted` per batch and `retentionSwept` at the end.
        case sweepRetention([RetentionSweep])
        /// Delete the resume data created `resumeDataLifetime` before `now`, with its partial files.
        case pruneResumeData(now: Double)
    }

    /// What `task.update` and `task.move` change in a task's row (nil: unchanged).
    struct TaskEdit: Equatable, Sendable {
        var priority: TaskPriority?
        /// Bytes per second; 0 removes the task's own limit.
        var bandwidthLimit: Int64?
        /// Before every other task of its priority, or behind all of them.
        var move: TaskMoveParams.Position?
    }

    /// An input a task's state machine refuses in its state.
    struct Refused: Error, Equatable {
        let task: Int64
        let transition: TaskStateMachine.IllegalTransition
    }

    /// Feeds an input; returns what the runner must do, in order. A refused task input changes nothing and
    /// returns `refused` alone.
    mutating func handle(_ input: Input, now: Double) -> [Action] {
        var actions: [Action] = []
        switch input {
        case let .created(created):
            for var t in created {
                if t.record.queueOrder >= nextQueueOrder { nextQueueOrder = t.record.queueOrder + 1 } // its place is taken
                Self.deferIfEarly(&t, now: now)
                tasks[t.id] = t // a queued one joins the queue with its state (or waits for its date)
                if t.machine.state == .queued, !mayTransfer(session: t.record.session) { regate(t.id, now: now, into: &actions) }
            }
            grantSlots(limits, now: now, into: &actions)
        case let .task(id, taskInput, extra):
            do {
                try apply(taskInput, to: id, extra: extra, now: now, into: &actions)
            } catch {
                return [.refused(error)]
            }
            grantSlots(limits, now: now, into: &actions) // a resumed task may start, a stopped one frees nothing yet
        case .grantSlots:
            grantSlots(limits, now: now, into: &actions)
        case .limitsChanged(let new):
            limits = new
            grantSlots(limits, now: now, into: &actions)
        case .retryTimerFired:
            for id in tasks.dueRetries(now: now) where !shuttingDown && tasks[id]?.machine.state == .waiting {
                _ = try? apply(.retryDue, to: id, now: now, into: &actions)
            }
            grantSlots(limits, now: now, into: &actions)
            if let at = tasks.earliestRetry, !shuttingDown { actions.append(.armRetryTimer(at: at)) }
        case .clockTick:
            guard !shuttingDown else { break }
            for id in tasks.dueDeadlines(now: now) { _ = try? apply(.resourceDeadlinePassed, to: id, now: now, into: &actions) }
            for id in tasks.dueBegins(now: now) { // their date came: they join the queue (or wait for the conditions)
                tasks[id]?.deferredUntil = nil
                if let session = tasks[id]?.record.session, !mayTransfer(session: session) { regate(id, now: now, into: &actions) }
            }
            grantSlots(limits, now: now, into: &actions)
            launchesDue(now: now, into: &actions)
            housekeepingDue(now: now, into: &actions)
        case let .attemptEnded(id, outcome, jitterSample):
            attemptEnded(id, outcome, jitterSample: jitterSample, limits: limits, now: now, into: &actions)
        case let .completion(id, attempt, completionInput):
            self.completionInput(id, attempt: attempt, completionInput, now: now, into: &actions)
        case let .recoveredCompletion(id, recovery, total):
            recoveredCompletion(id, recovery, total: total, now: now, into: &actions)
        case let .attemptProgress(id, .started(start)):
            responseStarted(id, start, into: &actions)
        case let .attemptProgress(id, .received(delta, total, expected)):
            received(id, delta: delta, total: total, expected: expected, now: now, into: &actions)
        case let .attemptProgress(id, .bodyOpened(bytes)):
            sent(id, delta: 0, total: 0, expected: bytes, into: &actions)
        case let .attemptProgress(id, .sent(delta, total, expected)):
            sent(id, delta: delta, total: total, expected: expected, into: &actions)
        case let .edited(id, edit):
            guard var t = tasks[id] else { break }
            if let priority = edit.priority { t.record.priority = priority }
            if let limit = edit.bandwidthLimit { t.record.bandwidthLimit = limit > 0 ? limit : nil }
            switch edit.move {
            case .front?:
                let lowest = tasks.queue.lowestOrder(priority: t.record.priority, excluding: id)
                t.record.queueOrder = QueuePlanner.frontOrder(among: lowest.map { [$0] } ?? [])
            case .back?:
                t.record.queueOrder = takeQueueOrder()
            case nil:
                break
            }
            t.record.updatedAt = now
            Self.deferIfEarly(&t, now: now)
            tasks[id] = t // one write: the table re-indexes the task once
            actions.append(.journal(t.record, []))
            if !mayTransfer(session: t.record.session) { regate(id, now: now, into: &actions) }
            grantSlots(limits, now: now, into: &actions)
        case .sessionOpened(let s):
            sessions[s.record.identifier] = s
        case let .sessionConfigured(identifier, configuration):
            let old = sessions[identifier]?.record.configuration
            sessions[identifier]?.record.configuration = configuration
            if let old, ConditionsGate.block(old, under: conditions) != ConditionsGate.block(configuration, under: conditions) {
                regate(session: identifier, now: now, into: &actions)
            }
            grantSlots(limits, now: now, into: &actions)
            if let old, old.launchUnit != configuration.launchUnit { launchUnitChanged(identifier, now: now, into: &actions) }
        case let .sessionInvalidating(identifier, cancelTasks):
            invalidating(identifier, cancelTasks: cancelTasks, now: now, into: &actions)
            grantSlots(limits, now: now, into: &actions)
        case .sessionRemoved(let identifier):
            removeSession(identifier)
            launches[identifier] = nil
        case let .eventsJournaled(session, lastSeq, count):
            eventsJournaled(session, lastSeq: lastSeq, count: count)
            launchIfUnattended(session, now: now, into: &actions)
        case let .eventsAcknowledged(session, through, pruned, droppedBodies):
            eventsAcknowledged(session, through: through, pruned: pruned, droppedBodies: droppedBodies)
            feedLaunch(session, .acknowledged(all: !hasPendingEvents(session)), now: now, into: &actions)
            // A session that keeps nothing once acknowledged loses its finished tasks now.
            if sessions[session]?.record.configuration.finishedTaskRetention == 0 {
                let sweeps = retentionSweeps(now: now, only: session)
                if !sweeps.isEmpty { actions.append(.sweepRetention(sweeps)) }
            }
        case let .resumeDataChanged(uid, kept, inFlight):
            Self.add(kept, to: &resumeDataKept, uid)
            Self.add(inFlight, to: &resumeDataInFlight, uid)
        case .retentionSwept(let backlog):
            retentionBacklog = retentionBacklog || backlog
        case let .subscribersChanged(session, count):
            guard sessions[session] != nil else { break }
            sessions[session]?.subscribers = count
            if count == 0 { launchIfUnattended(session, now: now, into: &actions) } // the last one left
        case let .launchStartAnswered(session, unit, error):
            guard launchUnit(of: session) == unit else { break } // reconfigured meanwhile
            feedLaunch(session, .startAnswered(error: error), now: now, into: &actions)
        case let .launchUnitEnded(session, unit, result, exitStatus):
            guard launchUnit(of: session) == unit else { break }
            feedLaunch(session, .unitEnded(result: result, exitStatus: exitStatus, pending: hasPendingEvents(session),
                                           subscribed: isSubscribed(session)), now: now, into: &actions)
        case let .sessionRestored(s):
            sessions[s.record.identifier] = s
            if s.pendingEvents > 0 { pendingEventsByUID[s.record.uid, default: 0] += s.pendingEvents }
        case let .taskRestored(t, partialLength):
            var t = t
            if let length = partialLength, Self.partialMayBeShort(t.record), length < t.record.durableRanges.upperBound {
                t.record.durableRanges = t.record.durableRanges.clipped(to: length)
                t.bytesReceived = t.record.bytesDurable
            }
            restore(t, now: now, into: &actions)
        case .restoreFinished:
            for (identifier, s) in sessions where s.record.state == .invalidating {
                invalidationDone(identifier, into: &actions)
            }
            // A session whose deletion was just asked for starts nothing (the runner deletes it first).
            let deleting = Set(actions.compactMap { if case .finishInvalidation(let s) = $0 { s } else { nil } })
            restoreLaunches(now: now, skipping: deleting, into: &actions)
            lastResumeDataPrune = now
            actions.append(.pruneResumeData(now: now)) // what expired while the daemon was down
        case .finishedTasksCounted(let counts):
            for (session, perState) in counts where sessions[session] != nil {
                for (state, n) in perState { tasks.countFinished(session: session, state: state, by: n) }
            }
        case let .finishedTasksDeleted(session, perState):
            guard sessions[session] != nil else { break }
            let counted = tasks.finishedCounts(session: session)
            for (state, n) in perState { tasks.countFinished(session: session, state: state, by: -min(n, counted[state] ?? 0)) }
        case .shutdownBegan:
            shuttingDown = true
        case let .connectionsChanged(host, extras):
            let before = extrasByHost[host] ?? 0
            extrasByHost[host] = extras > 0 ? extras : nil
            if extras < before { grantSlots(limits, now: now, into: &actions) }
        case let .conditionsChanged(new, serial):
            guard serial > conditionsSerial else { break } // an older report that arrived late
            conditionsSerial = serial
            conditionsChanged(new, limits: limits, now: now, into: &actions)
        case let .responseNamed(id, destination, suggested):
            guard var t = tasks[id], t.record.nameFromResponse, t.attemptInFlight else { break }
            t.record.nameFromResponse = false // settled: a later response does not rename it
            t.record.suggestedFilename = suggested
            let changed = destination != t.record.destination
            t.record.destination = destination
            tasks[id] = t // the reserved destinations follow
            actions.append(.journal(t.record, changed ? [.didChangeDestination(destination: destination,
                                                                             suggestedFilename: suggested)] : []))
        }
        return actions
    }

    /// The task's state machine takes the input; its actions become the runner's. Returns the machine's actions.
    @discardableResult
    mutating func apply(_ input: TaskStateMachine.Input, to id: Int64, extra: [EventPayload] = [],
                        update: ((inout TaskRecord) -> Void)? = nil, now: Double,
                        into actions: inout [Action]) throws(Refused) -> [TaskStateMachine.Action] {
        guard var t = tasks[id], !isMoving(id) else { return [] }
        t.machine.backoff = Backoff(sessions[t.record.session]?.record.configuration.retry) // the session's current policy
        let steps: [TaskStateMachine.Action]
        do {
            steps = try t.machine.handle(input, now: now)
        } catch {
            throw Refused(task: id, transition: error)
        }
        if steps.isEmpty {
            tasks[id] = t // what the machine counts (failures since progress) changed, nothing else
            return steps
        }
        var payloads: [EventPayload] = []
        var startNow = false, retryScheduled = false
        for step in steps {
            switch step {
            case .enqueue:
                // A restored task keeps its journaled place (restored in any order, the queue is as it was), and
                // so does one that waited for the conditions.
                if case .restored = input { break }
                if case .conditionsAllow = input { break }
                enqueue(&t)
            case .startTransfer:
                startNow = true
                t.record.attempts += 1 // journaled with the start, so a crash never loses an attempt's count
                t.attemptInFlight = true
                // A download resumes from its durable offset; an upload or data task starts from byte 0.
                let download = t.record.kind == TaskKind.download.rawValue
                t.bytesReceived = download ? t.record.bytesDurable : 0
                if t.record.kind == TaskKind.upload.rawValue { t.bytesSent = 0 }
            case .stopTransfer:
                actions.append(.stopAttempt(id))
            case .scheduleRetry:
                retryScheduled = true // `TaskTable` keeps the retry times of waiting tasks
            case .discardPartial:
                if t.attemptInFlight {
                    t.discardPartialWhenStopped = true
                } else {
                    actions.append(.removePartial(path: t.record.partialPath))
                }
                t.record.bytesDurable = 0
            case .keepPartialForResumeData:
                t.discardPartialWhenStopped = false
            case .emitStateChanged, .emitComplete:
                if case .emitComplete = step { payloads.append(contentsOf: extra) }
                if let payload = Self.payload(for: step) { payloads.append(payload) }
            }
        }
        update?(&t.record)
        payloads = payloads.map { $0.carrying(t.record.response) }
        t.syncRecord(now: now)
        Self.deferIfEarly(&t, now: now)
        tasks[id] = t
        if retryScheduled, let at = tasks.earliestRetry { actions.append(.armRetryTimer(at: at)) }
        actions.append(.journal(t.record, payloads))
        leaveCompletionIfStopped(id)
        if startNow { actions.append(.startAttempt(id)) }
        if t.machine.state.isTerminal { invalidationDone(t.record.session, into: &actions) }
        tasks.evict(id) // a finished task lives in the journal only
        // A task queued again (resumed, retrying, restored) waits instead while its session may not transfer.
        if t.machine.state == .queued, t.deferredUntil == nil, !mayTransfer(session: t.record.session) {
            regate(id, now: now, into: &actions)
        }
        return steps
    }

    /// Starts queued tasks while the daemon-wide, per-session and per-host limits allow: each next slot goes
    /// to the fair choice among the tasks that can start (`RunQueue.next`). Costs O(owners) per task started
    /// (plus tasks held at the head of a user's queue by a session or host limit), whatever the queue's length.
    mutating func grantSlots(_ limits: SlotLimits, now: Double, into actions: inout [Action]) {
        guard !shuttingDown else { return }
        var tried: Set<Int64> = []
        while tasks.running.count < limits.maxConcurrent {
            let next = tasks.queue.next(running: { self.tasks.runningByOwner[$0] ?? 0 },
                                        lastServed: { self.lastServed[$0] ?? 0 },
                                        isHeld: { self.isHeld($0, limits: limits) })
            guard let entry = next, tried.insert(entry.id).inserted else { return }
            servedSerial += 1
            lastServed[entry.owner] = servedSerial
            _ = try? apply(.slotGranted, to: entry.id, now: now, into: &actions)
        }
    }

    /// Whether a queued task cannot start now: its previous transfer is still stopping, or its session or
    /// host is at its limit.
    func isHeld(_ entry: RunQueue.Entry, limits: SlotLimits) -> Bool {
        QueuePlanner.ownHold(stopping: tasks.isStopping(entry.id), sessionRunning: tasks.runningBySession[entry.session] ?? 0,
                             sessionMax: sessions[entry.session]?.record.configuration.maxConcurrent,
                             hostRunning: connections(host: entry.host), hostMax: limits.maxConnectionsPerHost) != nil
    }

    /// Connections in use to `host`: one per running task, plus the extras of split downloads.
    func connections(host: String) -> Int {
        (tasks.runningByHost[host] ?? 0) + (extrasByHost[host] ?? 0)
    }

    /// How many extra connections `host` may have in all (`HostConnections`' allowance): what the per-host
    /// limit leaves after one per running task, and none while a task for the host is queued.
    func extraAllowance(host: String, limits: SlotLimits) -> Int {
        let running = tasks.runningByHost[host] ?? 0
        guard running > 0, (tasks.queuedByHost[host] ?? 0) == 0 else { return 0 }
        return max(0, limits.maxConnectionsPerHost - running)
    }

    /// A queued task whose `earliestBeginDate` is still ahead waits outside the queue until then (the clock
    /// tick lets it in: `TaskTable.dueBegins`); any other task is not deferred.
    static func deferIfEarly(_ t: inout ManagedTask, now: Double) {
        if t.machine.state == .queued, let begin = t.record.earliestBeginDate, begin > now {
            t.deferredUntil = begin
        } else {
            t.deferredUntil = nil
        }
    }

    /// Gives a task that enters the queue its place: the back of its priority class, unless it was moved to
    /// the front (a negative queue order, kept until it runs again). `TaskTable` puts it in the queue.
    mutating func enqueue(_ t: inout ManagedTask) {
        if t.record.queueOrder >= 0 { t.record.queueOrder = takeQueueOrder() }
    }

    /// The next place at the back of the queue (every task that enters the back takes one).
    mutating func takeQueueOrder() -> Int64 {
        defer { nextQueueOrder += 1 }
        return nextQueueOrder
    }

    static func payload(for action: TaskStateMachine.Action) -> EventPayload? {
        switch action {
        case let .emitStateChanged(from, to, reason): return .stateChanged(state: to, previous: from, reason: reason)
        case let .emitComplete(error): return .didComplete(error: error)
        default: return nil
        }
    }
}
