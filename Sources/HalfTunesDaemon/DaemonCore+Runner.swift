// The runner's one switch: every action of the state carried out, in order (a download's digest and move: +Transfers).
import Foundation
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol
import Logging

extension DaemonCore {
    // MARK: - Applying lifecycle inputs

    /// Feeds an input to a task's state machine (through `DaemonState`) and carries out the actions: its row
    /// is journaled with its events in one transaction. A refusal is the caller's answer (`illegalStateChange`).
    /// Returns the task as it is now: one the input finished is described from the row its actions journal, not
    /// read back from the journal (which would wait for the writer).
    @discardableResult
    func apply(_ input: TaskStateMachine.Input, to id: Int64) async throws(RPCError) -> ManagedTask? {
        try await applying(input, to: id).task
    }

    /// `apply`, also answering the actions the input was answered with (`makeResumeData` for `cancelTask`).
    func applying(_ input: TaskStateMachine.Input, to id: Int64) async throws(RPCError)
        -> (task: ManagedTask?, actions: [DaemonState.Action]) {
        if state.tasks[id] == nil {
            // A finished task lives in the journal only: the state answers for it as its state machine would.
            guard let read = try await finishedTask(id) else { throw RPCError.unknownTask(id) }
            guard state.tasks[id] == nil else { return try await applying(input, to: id) } // back in memory meanwhile
            if case .refused(let refusal)? = feed(.finishedTask(id, read.machine, input)).first {
                throw RPCError.illegalStateChange(task: id, from: refusal.transition.state, action: refusal.transition.input)
            }
            return (nil, []) // an input a finished task ignores
        }
        let actions = feed(.task(id, input))
        switch actions.first {
        case .refused(let refusal)?:
            throw RPCError.illegalStateChange(task: id, from: refusal.transition.state, action: refusal.transition.input)
        case .refusedWhileShuttingDown?:
            throw RPCError.daemonShuttingDown
        case .resumeDataRefused(let refusal)?:
            throw RPCError(refusal)
        case .heldWhileMoving?:
            await moveEnded(id)
            return try await applying(input, to: id) // on the state the move left
        default:
            break
        }
        run(actions)
        if let t = state.tasks[id] { return (t, actions) }
        for case let .journal(record, _) in actions.reversed() where record.id == id && record.state.isTerminal {
            return (finishedTask(record), actions)
        }
        return (nil, actions)
    }

    /// Carries out the state's actions, in order. Returns the outcome of the row it submitted for the caller that
    /// fed the input to answer with (`writeSession`, `writeResumeToken`).
    /// Inputs fed while they are carried out wait for the end of the list (`feedAndRun`), then are fed and carried
    /// out in turn.
    @discardableResult
    func run(_ actions: [DaemonState.Action]) -> WriteOutcome? {
        feeding.depth += 1
        let awaited = carryOut(actions)
        feeding.depth -= 1
        guard feeding.depth == 0 else { return awaited }
        while !feeding.waiting.isEmpty {
            let actions = feed(feeding.waiting.removeFirst())
            feeding.depth += 1
            carryOut(actions)
            feeding.depth -= 1
        }
        return awaited
    }

    /// The runner's one switch: each action carried out, in order.
    @discardableResult
    private func carryOut(_ actions: [DaemonState.Action]) -> WriteOutcome? {
        var awaited: WriteOutcome?
        var lastRow: (submitted: Bool, completionSeq: Int64?) = (false, nil) // the `journal` a `notify` follows
        for action in actions {
            switch action {
            case .refused(let refusal):
                // `apply` and the edits answer a refusal before running anything.
                logger.debug("task input refused", metadata: ["task": "\(refusal.task)", "input": "\(refusal.transition.input)"])
            case .heldWhileMoving:
                break // `apply` waits for the move and feeds the input again
            case .makeResumeData:
                break // an answer: `cancelTask` makes it once the transfer stopped
            case .refusedWhileShuttingDown(let id):
                logger.debug("task input refused while shutting down", metadata: ["task": "\(id)"])
            case .resumeDataRefused(let refusal):
                logger.debug("cancel with resume data refused", metadata: ["task": "\(refusal.task)"])
            case .admitted, .createRefused:
                break // `admitting`'s answer, read by task.create before anything runs
            case let .journal(record, payloads):
                lastRow = commit(record, payloads)
            case let .notify(notice, recipient):
                if lastRow.submitted { notify(notice, to: recipient, seq: lastRow.completionSeq) }
            case .startAttempt(let id):
                startTransfer(id)
            case let .setBandwidth(id, rate):
                attempts[id]?.bandwidth.setRate(rate)
            case .stopAttempt(let id):
                attempts[id]?.runtime.stop()
            case let .checkpoint(id, durable, head):
                // Submitted after every write of the task before it. A failure goes to the state, which writes the
                // task's row again (`rowWriteFailed`): the ranges are durable on disk already, the journal only lags.
                let session = state.tasks[id]?.record.session // always there: `checkpointed` came from the task
                let written: @Sendable (Error?) -> Void = { [weak self] error in
                    guard let error else { return }
                    Task { await self?.checkpointFailed(id, session: session, error: error) }
                }
                do {
                    try journal.submitCheckpoint(task: id, durable: durable, head: head, done: written)
                } catch {
                    written(error)
                }
            case let .deliver(session, id, payload):
                broadcast([Event(seq: nil, session: session, task: id, time: Timestamp.format(clock()), payload: payload)])
            case .removePartial(let path):
                discardPartial(path)
            case .armRetryTimer(let at):
                armRetryTimer(at: at)
            case let .computeDigest(id, attempt, path):
                computeDigest(id, attempt: attempt, path: path)
            case let .chooseName(id, attempt, preferred, destination, avoiding):
                chooseNameAndGoOn(id, attempt: attempt, preferred: preferred, destination: destination, avoiding: avoiding)
            case let .chooseResponseName(id, candidate, suggested, reserved):
                chooseResponseName(id, candidate: candidate, suggested: suggested, reserved: reserved)
            case let .move(id, attempt, partial, location, replacing, durable, metadata):
                move(id, attempt: attempt, partial: partial, to: location, replacing: replacing, partialIsDurable: durable,
                     metadata: metadata)
            case let .recoverPublish(id, partial, location):
                recoverPublish(id, partial: partial, location: location)
            case let .completionEnded(id, location, error):
                completionEnded(id, location: location, error: error)
            case .sessionOpen, .limitsTicket:
                break // answers, read by session.open and daemon.setLimits
            case .setGlobalBandwidth(let rate):
                services.globalBandwidth.setRate(rate)
            case .writeSession(let record):
                assert(awaited == nil, "one awaited row per input: its caller awaits one outcome")
                awaited = journal.submitting { try $0.upsertSession(record) }
            case .writeResumeToken(let row, _):
                assert(awaited == nil, "one awaited row per input: its caller awaits one outcome")
                awaited = journal.submitting { try $0.insertResumeToken(row) }
            case .keepResumeToken(let token):
                keepResumeToken(token)
            case .releaseSubscribers(let session):
                letSubscribersGo(session)
            case .finishInvalidation(let session):
                finishInvalidation(session)
            case let .recordLaunch(session, record):
                recordLaunch(session, record)
            case let .startUnit(session, unit, failures):
                startUnit(session, unit: unit, failures: failures)
            case let .watchUnit(session, unit):
                watchUnit(session, unit: unit)
            case let .askAgent(uid, session, unit):
                askAgent(uid, session: session, unit: unit)
            case .sweepRetention(let sweeps):
                sweepRetention(sweeps)
            case .pruneResumeData(let cutoff):
                pruneResumeData(createdBefore: cutoff)
            case let .hostAllowance(host, extras):
                hostConnections.setAllowance(extras, host: host)
            case .releaseFreePages:
                journal.submitting { try $0.releaseFreePages() }
            }
        }
        return awaited
    }

    /// Makes the retry timer wake at `at` instead of when it was set for (one timer for every waiting task; the
    /// state decides when: `DaemonState.armRetryTimer`).
    func armRetryTimer(at: Double) {
        timers.retryWake?.cancel()
        let delay = max(0, at - clock())
        timers.retryWake = Task { [weak self] in
            try? await Task.sleep(nanoseconds: UInt64(Seconds.nanoseconds(delay)))
            guard !Task.isCancelled else { return }
            await self?.retriesDue()
        }
    }

    /// The retry timer fired: every waiting task whose time has come retries, then the timer waits for the next.
    private func retriesDue() {
        timers.retryWake = nil
        feedAndRun(.retryTimerFired)
    }

    // MARK: - Launch units (the state decides; these start, watch and journal)

    /// `startUnit`: asks the service manager; its answer comes back as `launchStartAnswered`.
    func startUnit(_ identifier: String, unit: String, failures: Int) {
        logger.notice("starting the session's launch unit: its events wait and no client is subscribed",
                      metadata: ["session": "\(identifier)", "unit": "\(unit)", "failures": "\(failures)"])
        services.launcher.start(unit) { [weak self] error in
            Task { await self?.launchStartAnswered(identifier, unit: unit, error: error) }
        }
    }

    /// `watchUnit`: its end comes back as `launchUnitEnded`.
    func watchUnit(_ identifier: String, unit: String) {
        services.launcher.watch(unit) { [weak self] result, status in
            Task { await self?.launchUnitEnded(identifier, unit: unit, result: result, exitStatus: status) }
        }
    }

    /// `askAgent`: the user's agent is told to start the unit (its reports come back as `agent.started` and
    /// `agent.ended`). An agent that left meanwhile gets nothing: its `agentLeft` puts the launch back to waiting.
    func askAgent(_ uid: UInt32, session identifier: String, unit: String) {
        logger.notice("asking the user's agent to start the session's launch unit: its events wait, nobody subscribed",
                      metadata: ["session": "\(identifier)", "unit": "\(unit)", "uid": "\(uid)"])
        let launch = AgentLaunch(session: SessionNames.presented(identifier, to: uid), unit: unit)
        guard let outbox = services.agents.outbox(of: uid),
              let line = try? RPCNotification(method: AgentLaunch.method, params: JSONValue(encoding: launch)).line()
        else {
            return logger.error("the user's agent could not be asked: its connection is gone (its leaving is handled next)",
                                metadata: ["session": "\(identifier)", "uid": "\(uid)"])
        }
        outbox.send(line: line)
    }

    /// A checkpoint the journal did not take: the state has the task's row written again (`rowWriteFailed`, after a
    /// wait that grows with its failures), which carries the durable ranges.
    private func checkpointFailed(_ id: Int64, session: String?, error: any Error) {
        guard let session else { return }
        rowWriteFailed(.init(id: id, session: session), error: error, what: "checkpoint")
    }

    /// `recordLaunch`: the session's launch record, journaled in its turn; a failure goes to the state, which writes
    /// it again (`launchRecordWriteFailed`).
    func recordLaunch(_ identifier: String, _ record: SessionLaunchRecord?) {
        submit({ try $0.setSessionLaunch(identifier, record) },
               failing: "the session's launch record could not be journaled; it is written again",
               metadata: ["session": "\(identifier)"]) { .launchRecordWriteFailed(identifier, journalTakesWrites: $0) }
    }

    /// Submits a journal write in its turn, not waited for; if it fails, the error is logged with `message` and the
    /// state is fed `input`, told whether the journal still takes writes (what it does about it is its own).
    func submit(_ write: @escaping @Sendable (Journal) throws -> Void, failing message: String,
                metadata: Logger.Metadata, feeds input: @escaping @Sendable (_ journalTakesWrites: Bool) -> DaemonState.Input) {
        let written = journal.submitting(write)
        Task { [weak self] in
            guard let error = await written.failure else { return }
            await self?.writeFailed(message, metadata: metadata, error: error, feeds: input)
        }
    }

    private func writeFailed(_ message: String, metadata: Logger.Metadata, error: String,
                             feeds input: (_ journalTakesWrites: Bool) -> DaemonState.Input) {
        logger.error("\(message)", metadata: metadata.merging(["error": "\(error)"]) { _, new in new })
        feedAndRun(input(journal.takesWrites))
    }

    private func launchStartAnswered(_ identifier: String, unit: String, error: String?) {
        if let error {
            logger.warning("the session's launch unit could not be started", metadata: [
                "session": "\(identifier)", "unit": "\(unit)", "error": "\(error)"])
        }
        feedAndRun(.launchStartAnswered(identifier, unit: unit, error: error))
    }

    private func launchUnitEnded(_ identifier: String, unit: String, result: String, exitStatus: Int32) {
        logger.notice("the session's launch unit ended", metadata: [
            "session": "\(identifier)", "unit": "\(unit)", "result": "\(result)", "exitStatus": "\(exitStatus)",
            "eventsAcknowledged": "\(!state.hasPendingEvents(identifier))"])
        feedAndRun(.launchUnitEnded(identifier, unit: unit, result: result, exitStatus: exitStatus))
        if let m = state.launches[identifier], m.phase == .backoff, let at = m.record.nextAttemptAt {
            logger.notice("the session's launch unit is started again later", metadata: [
                "session": "\(identifier)", "unit": "\(unit)", "at": "\(Timestamp.format(at))"])
        }
    }

    /// The runner's subscribers of the session changed: the state counts them (none left may start its unit).
    func subscribersChanged(_ identifier: String) {
        feedAndRun(.subscribersChanged(identifier, count: subscribers.count(of: identifier)))
    }

    /// What `SessionInfo.launch` shows.
    func launchInfo(_ s: ManagedSession) -> SessionLaunch? {
        guard let unit = state.launchUnit(of: s.record.identifier) else { return nil }
        let r = state.launches[s.record.identifier]?.record ?? s.record.launch ?? SessionLaunchRecord()
        return SessionLaunch(unit: unit, lastLaunchAt: r.lastLaunchAt.map(Timestamp.format), lastResult: r.lastResult,
                             lastMessage: r.lastMessage, nextAttemptAt: r.nextAttemptAt.map(Timestamp.format),
                             failures: r.failures)
    }

    // MARK: - Housekeeping (retention sweeps, expired resume data)

    /// `sweepRetention`: deletes the finished tasks the sweeps allow (acknowledged, their session's
    /// `finishedTaskRetention` passed, not in memory), with their data-task bodies, in the batches
    /// `RetentionSweepPlan` decides (what is left goes on at the next tick: `retentionSwept(backlog: true)`), and
    /// gives the freed pages back to the file system. The cost follows the sessions with finished tasks and the
    /// rows deleted, not how many tasks there are.
    /// Each batch is an operation on the journal's thread, awaited in the background (`inBackground`).
    func sweepRetention(_ sweeps: [RetentionSweep]) {
        inBackground { core in await core.sweepingRetention(sweeps) }
    }

    private func sweepingRetention(_ sweeps: [RetentionSweep]) async {
        var plan = RetentionSweepPlan(sweeps)
        while let sweep = plan.next() {
            let deleted: [TaskState: Int]
            do {
                deleted = try await journal.writing({ try $0.deleteFinishedTasks(
                    session: sweep.session, finishedBefore: sweep.before, limit: RetentionSweepPlan.batch, keeping: sweep.keeping) })
            } catch {
                // Nothing of the batch went (one transaction): the plan goes on with the next session, and the next
                // sweep (in a minute, or at the session's next acknowledgement) tries these again.
                logger.warning("finished tasks could not be deleted; the next sweep tries again",
                               metadata: ["session": "\(sweep.session)", "error": "\(error)"])
                plan.deleted(nil)
                continue
            }
            let count = deleted.values.reduce(0, +)
            if count > 0 {
                feedAndRun(.finishedTasksDeleted(sweep.session, deleted))
                logger.debug("finished tasks deleted", metadata: ["session": "\(sweep.session)", "tasks": "\(count)"])
            }
            plan.deleted(count)
        }
        feedAndRun(.retentionSwept(backlog: plan.backlog, deletedAny: plan.deletedAny))
    }

    /// `pruneResumeData`: resume data created before `cutoff` goes, with its partial file (in the background,
    /// through the journal's thread). If the journal fails (a full disk, an I/O error), what is left stays, with
    /// its partial, and the state is told (`resumeDataExpiryFailed`: tried again in a minute).
    func pruneResumeData(createdBefore cutoff: Double) {
        inBackground { core in
            let journal = core.journal
            do {
                for token in try await journal.reading({ try $0.resumeTokens(createdBefore: cutoff) }) {
                    let name = token.token
                    // Taken, not just deleted: a token redeemed meanwhile (a task.create) is neither counted nor
                    // has its partial removed twice.
                    guard let taken = try await journal.writing({ try $0.takeResumeToken(name) }) else { continue }
                    core.discardPartial(taken.partialPath)
                    core.feedAndRun(.resumeTokensChanged(session: taken.session, by: -1))
                }
            } catch {
                core.logger.warning("expired resume data could not be deleted; it is kept, and tried again in a minute",
                                    metadata: ["error": "\(error)"])
                core.feedAndRun(.resumeDataExpiryFailed)
            }
        }
    }

    /// Runs `work` in the background, after the background work started before it (one piece at a time, in
    /// order): journal work the runner carries out without holding the core. `settled()` waits for all of it.
    func inBackground(_ work: @escaping @Sendable (isolated DaemonCore) async -> Void) {
        let previous = timers.background
        timers.background = Task { [weak self] in
            await previous?.value
            guard let self else { return }
            await work(self)
        }
    }

    /// Waits until the background work started so far (and any it started) has ended: an answer that depends on
    /// it (an acknowledgement's sweep, an invalidation's end) comes after.
    func settled() async {
        while let tail = timers.background {
            await tail.value
            if timers.background == tail { timers.background = nil }
        }
    }
}
