// The core's state as a value: sessions, unfinished tasks and the queue; inputs in, actions out, no I/O.
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol

/// What the daemon knows, held by `DaemonCore` (the runner) and changed only through `handle(_:now:)` for
/// the task lifecycle: an input changes the state and returns the actions the runner carries out (journal,
/// start or stop an attempt, remove a partial file, arm the retry timer). Nothing here touches a file, a
/// socket or the clock, so the queue, the limits, retries and resource deadlines are unit-tested in virtual
/// time (`DaemonStateTests`).
struct DaemonState {
    var sessions = SessionTable()
    /// The unfinished tasks (and finished ones still stopping a transfer or publishing) with their indexes.
    var tasks = TaskTable()
    /// The next queue order given to a task that enters the back of the queue (`admitting` takes one for a
    /// create that starts at once; `created` and recovery move past the places their tasks hold).
    var nextQueueOrder: Int64 = 1
    /// The creates admitted and not yet `created` (DaemonState+Admission.swift).
    var admitted = Admitted()
    /// When each uid was last given a transfer slot (a serial number): between users with as many transfers
    /// running, the one served longest ago goes first (`RunQueue.next`).
    var lastServed: [UInt32: Int64] = [:]
    var servedSerial: Int64 = 0
    /// When the runner's retry timer wakes (nil: not set), `armRetryTimer`.
    var retryTimerAt: Double?
    /// The last reconfiguration ticket handed out (`sessionOpening`), for every session: `ManagedSession.configApplied`.
    var configTicketSerial: UInt64 = 0
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
    /// Launch records whose journal write failed, to be written again (DaemonState+Launch.swift).
    var launchRewrites: [String: RewriteSchedule] = [:]

    /// Nothing is pending (what exit-when-idle waits for): no task queued, running or waiting to retry, no transfer
    /// still stopping, no file being moved into place (`TaskTable` keeps it as tasks change: O(1)), and no row or
    /// launch record to write again. Suspended tasks do not count.
    var isIdle: Bool { !tasks.anyBusy && rowRewrites.isEmpty && launchRewrites.isEmpty }
    /// The daemon's own uid: its sessions' units start in the daemon's own service manager; every other user's in
    /// that user's, by their agent (`agents`: the uids with one connected).
    var daemonUID: UInt32 = 0
    /// The uids no share of the disk limits (`max-disk-per-uid`): root and the daemon's own.
    var diskExempt: Set<UInt32> { [0, daemonUID] }
    /// How downloads write their partial files (the daemon's configuration): every download's plan carries it.
    var partialWriting = PartialWriting()
    var agents: Set<UInt32> = []
    /// When finished tasks were last swept, and whether that sweep left work behind (DaemonState+Retention.swift);
    /// when resume data last expired.
    var lastRetentionSweep: Double = 0
    var retentionBacklog = false
    var lastResumeDataPrune: Double = 0
    /// Resume data each uid keeps (journaled tokens, each holding a partial file), and cancels making some now:
    /// `max-resume-data-per-uid` bounds their sum (`resumeDataHeld`; DaemonState+ResumeData.swift).
    var resumeDataKept: [UInt32: Int] = [:]
    var resumeDataInFlight: [UInt32: Int] = [:]
    /// The canceled tasks whose resume data is being made: they stay in memory until it is made.
    var resumeDataBeingMade: [Int64: ResumeDataMaking] = [:]
    /// Each session's proxy rules, and the distinct proxies each uid's attempts in flight go through: a queued
    /// task that would need one too many waits (`uidMaxProxies`; DaemonState+Proxies.swift).
    var proxies = ProxyUse()
    /// Task rows whose journal write failed, to be written again (DaemonState+RowRewrites.swift).
    var rowRewrites: [Int64: RowRewrite] = [:]
    /// The tasks that ran in each of the daemon's last crashes (`CrashHistory`): failed at restore, not started.
    var quarantine: Set<Int64> = []
    /// The allowance of extra connections each host was last given (`hostAllowance`; none stored: 0).
    var hostAllowances: [String: Int] = [:]

    /// The daemon-wide limits a slot is granted within (the session's own `maxConcurrent` is in `sessions`).
    struct SlotLimits: Equatable, Sendable {
        var maxConcurrent: Int
        var maxConnectionsPerHost: Int
    }
    /// The limits slots are granted within: the ones in effect (DaemonState+Limits.swift).
    var limits: SlotLimits
    /// Where the daemon-wide limits come from, and the daemon-wide bandwidth the runner was last told
    /// (`setGlobalBandwidth`; 0: none, as its bucket starts).
    var limitSources: LimitSources
    var globalBandwidth: Int64 = 0
    /// What a session and a uid may hold before a new task is refused (`admitting`).
    let caps: Caps

    /// `proxyRules`: the daemon's, until `proxyRulesChanged` says otherwise.
    init(limits: SlotLimits = SlotLimits(maxConcurrent: 6, maxConnectionsPerHost: 6), caps: Caps = Caps(),
         proxyRules: ProxyRules = .none, daemonUID: UInt32 = 0, partialWriting: PartialWriting = PartialWriting()) {
        self.limits = limits
        self.daemonUID = daemonUID
        self.partialWriting = partialWriting
        self.limitSources = LimitSources(configured: DaemonLimits(maxConcurrent: limits.maxConcurrent,
                                                                  maxConnectionsPerHost: limits.maxConnectionsPerHost,
                                                                  bandwidthLimit: 0))
        self.caps = caps
        _ = proxies.setDaemonRules(proxyRules) // no session yet
    }

    /// Feeds an input; returns what the runner must do, in order. A refused task input or edit changes nothing
    /// and returns `refused` alone. A finished task's row is followed by its notice when its session asks for one
    /// (DaemonState+Notices.swift).
    mutating func handle(_ input: Input, now: Double) -> [Action] {
        // Two statements: in one, `self` would be read for `withNotices` before `take` changes it, and Swift would
        // keep a copy of the whole state across that change (every table copied, once per input).
        let actions = take(input, now: now)
        var result = withNotices(actions, now: now)
        allowancesChanged(into: &result)
        return result
    }

    private mutating func take(_ input: Input, now: Double) -> [Action] {
        var actions: [Action] = []
        tasks.clearChangedHosts() // from here on, the hosts this input changes (`TaskTable.changedHosts`)
        switch input {
        case let .admitting(new):
            actions = admit(new, now: now)
        case .admissionsWithdrawn:
            withdrawAdmissions(into: &actions)
        case let .resumeTokenRedeemed(token):
            resumeTokenRedeemed(token, into: &actions)
        case let .resumeTokenNotKept(owner, partial):
            Self.add(-1, to: &resumeDataKept, owner) // counted at `keepResumeToken`
            actions.append(.removePartial(path: partial))
        case let .resumePartialNotMoved(partial, into):
            resumePartialNotMoved(partial, into: into, actions: &actions)
        case .created(let stored):
            join(createdTasks(stored), now: now, into: &actions)
        case let .createsJournaled(ids, failed, lostEvents):
            for (session, count) in lostEvents { eventsLost(session, count: count) }
            for id in ids {
                guard let t = tasks[id], t.inserting else { continue }
                if failed {
                    tasks[id] = nil
                    if t.partialMayExist { actions.append(.removePartial(path: t.record.partialPath)) } // resume data's
                } else {
                    tasks[id]?.inserting = false
                }
            }
            grantSlots(limits, now: now, into: &actions)
        case let .task(id, taskInput, extra):
            // Nothing starts any more: a resume would only journal a queued task for the next start.
            if shuttingDown, taskInput == .resume { return [.refusedWhileShuttingDown(task: id)] }
            // A suspend or cancel acts on the state the move leaves (usually `completed`, which they may not
            // change): it is held until the move's outcome, and fed again then.
            if isMoving(id), Self.waitsForAMove(taskInput) { return [.heldWhileMoving(task: id)] }
            if taskInput == .cancel(keepPartial: true) { return cancelAskingResumeData(id, extra: extra, now: now) }
            do {
                try apply(taskInput, to: id, extra: extra, now: now, into: &actions)
            } catch {
                return [.refused(error)]
            }
            grantSlots(limits, now: now, into: &actions) // a resumed task may start, a stopped one frees nothing yet
        case let .finishedTask(id, machine, taskInput):
            var finished = machine
            do {
                _ = try finished.handle(taskInput, now: now)
            } catch {
                return [.refused(Refused(task: id, transition: error))]
            }
        case .grantSlots:
            grantSlots(limits, now: now, into: &actions)
        case .limitsConfigured(let configured):
            limitSources.configured = configured
            limitSourcesChanged(now: now, into: &actions)
        case .limitsRestored(let stored):
            limitSources.overrides = Self.overrides(stored: stored)
            limitSourcesChanged(now: now, into: &actions)
        case .limitsSetting:
            limitSources.issued += 1
            actions.append(.limitsTicket(limitSources.issued))
        case let .limitsWritten(values, ticket):
            limitSources.written(values, ticket: ticket)
            limitSourcesChanged(now: now, into: &actions)
        case .retryTimerFired:
            for id in tasks.dueRetries(now: now) where !shuttingDown && tasks[id]?.machine.state == .waiting {
                _ = try? apply(.retryDue, to: id, now: now, into: &actions)
            }
            grantSlots(limits, now: now, into: &actions)
            retryTimerAt = nil // it fired: set again for the earliest retry left
            armRetryTimer(into: &actions)
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
            rowRewritesDue(now: now, into: &actions)
            launchRewritesDue(now: now, into: &actions)
        case let .attemptEnded(id, outcome, jitterSample):
            attemptEnded(id, outcome, jitterSample: jitterSample, limits: limits, now: now, into: &actions)
        case let .completion(id, attempt, completionInput):
            self.completionInput(id, attempt: attempt, completionInput, now: now, into: &actions)
        case let .recoveredCompletion(id, recovery, total):
            recoveredCompletion(id, recovery, total: total ?? tasks[id]?.record.bytesDurable ?? 0, now: now, into: &actions)
        case let .attemptProgress(id, .started(start)):
            responseStarted(id, start, into: &actions)
        case let .attemptProgress(id, .received(delta, total, expected)):
            received(id, delta: delta, total: total, expected: expected, now: now, into: &actions)
        case let .attemptProgress(id, .bodyOpened(bytes)):
            sent(id, delta: 0, total: 0, expected: bytes, into: &actions)
        case let .attemptProgress(id, .proxyLeased(server)):
            if let t = tasks[id], t.attemptInFlight { proxies.leased(id, owner: t.owner, ProxyRef(server)) }
        case let .attemptProgress(id, .checkpointed(durable)):
            checkpointed(id, durable, into: &actions)
        case let .attemptProgress(id, .sent(delta, total, expected)):
            sent(id, delta: delta, total: total, expected: expected, into: &actions)
        case let .edited(id, edit):
            let input = edit.move == nil ? "update" : "move"
            guard var t = tasks[id] else {
                // A finished task the journal alone holds is edited no more; an unknown one is the caller's to answer.
                if let finished = edit.finished { return [.refused(Refused(task: id, transition: .init(state: finished, input: input)))] }
                break
            }
            // `task.move` takes a task not running (its place is for its next turn); `task.update` any unfinished one.
            let state = t.machine.state
            guard edit.move == nil ? !state.isTerminal : [.queued, .suspended, .waiting].contains(state) else {
                return [.refused(Refused(task: id, transition: .init(state: state, input: input)))]
            }
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
            let row = t.record.written()
            tasks[id] = t // one write: the table re-indexes the task once
            actions.append(.journal(row, []))
            if edit.bandwidthLimit != nil, t.attemptInFlight { actions.append(.setBandwidth(id, rate: t.record.bandwidthLimit ?? 0)) }
            if !mayTransfer(session: t.record.session) { regate(id, now: now, into: &actions) }
            grantSlots(limits, now: now, into: &actions)
        case let .sessionOpening(record, reconfigure):
            opening(record, reconfigure: reconfigure, into: &actions)
        case let .sessionConfigured(identifier, configuration, ticket):
            guard sessions[identifier]?.record.state == .active else { break } // invalidated meanwhile: it keeps its own
            if let ticket {
                guard let s = sessions[identifier], ticket > s.configApplied else { break }
                sessions[identifier]?.configApplied = ticket
            }
            let old = sessions[identifier]?.record.configuration
            sessions[identifier]?.record.configuration = configuration
            if old != nil { proxySettings(session: identifier, configuration) }
            if let old, ConditionsGate.block(old, under: conditions) != ConditionsGate.block(configuration, under: conditions) {
                regate(session: identifier, now: now, into: &actions)
            }
            grantSlots(limits, now: now, into: &actions)
            if let old, old.launchUnit != configuration.launchUnit { launchUnitChanged(identifier, now: now, into: &actions) }
        case let .sessionInvalidating(identifier, cancelTasks):
            invalidating(identifier, cancelTasks: cancelTasks, now: now, into: &actions)
            grantSlots(limits, now: now, into: &actions)
        case let .sessionRemoved(identifier, createdAt):
            // A new session whose row failed goes only if it is still that one (not one opened again since).
            guard createdAt == nil || sessions[identifier]?.record.createdAt == createdAt else { break }
            removeSession(identifier, into: &actions)
        case let .invalidationFinished(identifier, deletedTokens):
            invalidationFinished(identifier, deletedTokens: deletedTokens, into: &actions)
        case let .eventsJournaled(session, lastSeq, count):
            eventsJournaled(session, lastSeq: lastSeq, count: count)
            launchIfUnattended(session, now: now, into: &actions)
        case let .eventsAcknowledged(session, through, pruned, droppedBodies):
            eventsAcknowledged(session, through: through, pruned: pruned, droppedBodies: droppedBodies)
            if pruned >= Self.largeAcknowledgement { actions.append(.releaseFreePages) } // many pages freed at once
            feedLaunch(session, .acknowledged(all: !hasPendingEvents(session)), now: now, into: &actions)
            // A session that keeps nothing once acknowledged loses its finished tasks now.
            if sessions[session]?.record.configuration.finishedTaskRetention == 0 {
                let sweeps = retentionSweeps(now: now, only: session)
                if !sweeps.isEmpty { actions.append(.sweepRetention(sweeps)) }
            }
        case let .resumeDataChanged(uid, kept):
            Self.add(kept, to: &resumeDataKept, uid)
        case .rowWriteFailed(let failure):
            rowWriteFailed(failure, now: now, into: &actions)
        case let .resumeTokensChanged(session, by):
            if let uid = sessions[session]?.record.uid { Self.add(by, to: &resumeDataKept, uid) }
        case let .resumeDataStopped(id, durable, partialLength, token):
            resumeDataStopped(id, durable: durable, partialLength: partialLength, token: token, now: now, into: &actions)
        case let .resumeTokenWritten(id, failed):
            resumeTokenWritten(id, failed: failed, into: &actions)
        case let .retentionSwept(backlog, deletedAny):
            retentionBacklog = retentionBacklog || backlog
            if deletedAny { actions.append(.releaseFreePages) }
        case .resumeDataExpiryFailed:
            resumeDataExpiryFailed(now: now)
        case let .subscribersChanged(session, count):
            guard sessions[session] != nil else { break }
            sessions[session]?.subscribers = count
            if count == 0 { launchIfUnattended(session, now: now, into: &actions) } // the last one left
        case .agentRegistered(let uid):
            agentRegistered(uid, now: now, into: &actions)
        case .agentLeft(let uid):
            agentLeft(uid, now: now, into: &actions)
        case let .launchStartAnswered(session, unit, error):
            guard launchUnit(of: session) == unit else { break } // reconfigured meanwhile
            feedLaunch(session, .startAnswered(error: error), now: now, into: &actions)
        case let .launchRecordWriteFailed(session, journalTakesWrites):
            if journalTakesWrites { launchRecordWriteFailed(session, now: now) } // else no write could succeed
        case let .launchUnitEnded(session, unit, result, exitStatus):
            guard launchUnit(of: session) == unit else { break }
            feedLaunch(session, .unitEnded(result: result, exitStatus: exitStatus, pending: hasPendingEvents(session),
                                           subscribed: isSubscribed(session)), now: now, into: &actions)
        case let .sessionRestored(s):
            sessions[s.record.identifier] = s
            proxySettings(session: s.record.identifier, s.record.configuration)
            if s.pendingEvents > 0 { pendingEventsByUID[s.record.uid, default: 0] += s.pendingEvents }
        case let .crashesRead(quarantine):
            self.quarantine = quarantine
        case let .taskRestored(row, partialLength):
            guard row.id != nil, let s = sessions[row.session] else { break } // the journal deletes a session's tasks with it
            var t = ManagedTask(row: row, owner: s.record.uid)
            if let length = partialLength, Self.partialMayBeShort(t.record), length < t.record.durableRanges.upperBound {
                t.record.durableRanges = t.record.durableRanges.clipped(to: length)
                t.bytesReceived = t.record.bytesDurable
            }
            restore(t, now: now, into: &actions)
        case .restoreFinished:
            for (identifier, s) in sessions.sorted(by: { $0.key < $1.key }) where s.record.state == .invalidating {
                invalidationDone(identifier, into: &actions)
            }
            // A session whose deletion was just asked for starts nothing (the runner deletes it first).
            let deleting = Set(actions.compactMap { if case .finishInvalidation(let s) = $0 { s } else { nil } })
            restoreLaunches(now: now, skipping: deleting, into: &actions)
            lastResumeDataPrune = now
            actions.append(.pruneResumeData(createdBefore: now - caps.resumeDataLifetime)) // expired while down
        case .finishedTasksCounted(let counts):
            for (session, perState) in counts where sessions[session] != nil {
                for (state, n) in perState { tasks.countFinished(session: session, state: state, by: n) }
            }
        case let .finishedTasksDeleted(session, perState):
            guard sessions[session] != nil else { break }
            let counted = tasks.finishedCounts(session: session)
            for (state, n) in perState { tasks.countFinished(session: session, state: state, by: -min(n, counted[state] ?? 0)) }
        case .shutdownBegan:
            retryTimerAt = nil // the runner stops its timer; none is set again
            shuttingDown = true
            for id in tasks.attemptsInFlight { actions.append(.stopAttempt(id)) }
        case .proxyRulesChanged(let rules):
            proxyRulesChanged(rules, now: now, into: &actions)
        case .shutdownGraceEnded:
            for id in tasks.attemptsInFlight {
                if let t = tasks[id] { actions.append(.journal(t.record, [])) }
            }
            rowRewritesDue(now: now, all: true, into: &actions) // a last try: nothing after this would
            launchRewritesDue(now: now, all: true, into: &actions)
        case let .connectionsChanged(host, extras):
            let before = extrasByHost[host] ?? 0
            extrasByHost[host] = extras > 0 ? extras : nil
            if extras < before { grantSlots(limits, now: now, into: &actions) }
        case let .conditionsChanged(new, serial):
            guard serial > conditionsSerial else { break } // an older report that arrived late
            conditionsSerial = serial
            conditionsChanged(new, limits: limits, now: now, into: &actions)
        case let .responseNamed(id, destination, suggested):
            responseNamed(id, destination: destination, suggested: suggested, into: &actions)
        }
        return actions
    }
}
