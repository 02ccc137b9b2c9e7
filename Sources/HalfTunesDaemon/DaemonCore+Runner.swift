// The runner: feeds the state's inputs and carries out every action it returns, in order; it decides nothing.
import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    // MARK: - Applying lifecycle inputs

    /// Feeds an input to a task's state machine (through `DaemonState`) and carries out the actions: its row
    /// is journaled with its events in one transaction. A refusal is the caller's answer (`illegalStateChange`).
    /// Returns the task as it is now: one the input finished is described from the row its actions journal, not
    /// read back from the journal (which would wait for the writer).
    @discardableResult
    func apply(_ input: TaskStateMachine.Input, to id: Int64) async throws(RPCError) -> ManagedTask? {
        if state.tasks[id] == nil {
            // A finished task lives in the journal only: it refuses every input as its state machine would.
            guard let read = try await finishedTask(id) else { throw RPCError.unknownTask(id) }
            guard state.tasks[id] == nil else { return try await apply(input, to: id) } // back in memory meanwhile
            var finished = read.machine
            do {
                _ = try finished.handle(input, now: clock())
            } catch {
                throw RPCError.illegalStateChange(task: id, from: error.state, action: error.input)
            }
            return nil // an input a finished task ignores
        }
        let actions = feed(.task(id, input))
        if case .refused(let refusal)? = actions.first {
            throw RPCError.illegalStateChange(task: id, from: refusal.transition.state, action: refusal.transition.input)
        }
        run(actions)
        if let t = state.tasks[id] { return t }
        for case let .journal(record, _) in actions.reversed() where record.id == id && record.state.isTerminal {
            return finishedTask(record)
        }
        return nil
    }

    /// Carries out the state's actions, in order.
    func run(_ actions: [DaemonState.Action]) {
        for action in actions {
            switch action {
            case .refused(let refusal):
                // Only `apply` feeds task inputs, and it answers a refusal before running anything.
                logger.debug("task input refused", metadata: ["task": "\(refusal.task)", "input": "\(refusal.transition.input)"])
            case let .journal(record, payloads):
                commit(record, payloads)
            case .startAttempt(let id):
                startTransfer(id)
            case .stopAttempt(let id):
                attempts[id]?.runtime.stop()
            case let .deliver(session, id, payload):
                broadcast([Event(seq: nil, session: session, task: id, time: Timestamp.format(clock()), payload: payload)])
            case .removePartial(let path):
                discardPartial(path)
            case .armRetryTimer(let at):
                armRetryTimer(at: at)
            case let .computeDigest(id, attempt, path):
                computeDigest(id, attempt: attempt, path: path)
            case let .chooseName(id, attempt, avoiding):
                chooseNameAndGoOn(id, attempt: attempt, avoiding: avoiding)
            case let .move(id, attempt, partial, location, replacing, durable):
                move(id, attempt: attempt, partial: partial, to: location, replacing: replacing, partialIsDurable: durable)
            case let .completionEnded(id, location, error):
                completionEnded(id, location: location, error: error)
            case .finishInvalidation(let session):
                finishInvalidation(session)
            case let .recordLaunch(session, record):
                recordLaunch(session, record)
            case let .startUnit(session, unit, failures):
                startUnit(session, unit: unit, failures: failures)
            case let .watchUnit(session, unit):
                watchUnit(session, unit: unit)
            case .sweepRetention(let sweeps):
                sweepRetention(sweeps)
            case .pruneResumeData(let now):
                pruneResumeData(now: now)
            }
        }
    }

    /// Makes the retry timer wake at `at`, the earliest retry time of any waiting task (one timer for all of
    /// them, however many wait). A timer already set for that time or earlier stays: it re-arms when it fires.
    func armRetryTimer(at: Double) {
        guard !state.shuttingDown else { return }
        if let wake = retryWake, wake.at <= at { return }
        retryWake?.task.cancel()
        let delay = max(0, at - clock())
        retryWake = (at, Task { [weak self] in
            try? await Task.sleep(nanoseconds: UInt64(delay * 1e9))
            guard !Task.isCancelled else { return }
            await self?.retriesDue()
        })
    }

    /// The retry timer fired: every waiting task whose time has come retries, then the timer waits for the next.
    private func retriesDue() {
        retryWake = nil
        feedAndRun(.retryTimerFired)
    }

    /// The configuration's daemon-wide limits (the state keeps them: `limitsChanged` at start and on every change).
    var slotLimits: DaemonState.SlotLimits {
        DaemonState.SlotLimits(maxConcurrent: configuration.maxConcurrent,
                               maxConnectionsPerHost: configuration.maxConnectionsPerHost)
    }

    // MARK: - Launch units (the state decides; these start, watch and journal)

    /// `startUnit`: asks the service manager; its answer comes back as `launchStartAnswered`.
    func startUnit(_ identifier: String, unit: String, failures: Int) {
        logger.notice("starting the session's launch unit: its events wait and no client is subscribed",
                      metadata: ["session": "\(identifier)", "unit": "\(unit)", "failures": "\(failures)"])
        launcher.start(unit) { [weak self] error in
            Task { await self?.launchStartAnswered(identifier, unit: unit, error: error) }
        }
    }

    /// `watchUnit`: its end comes back as `launchUnitEnded`.
    func watchUnit(_ identifier: String, unit: String) {
        launcher.watch(unit) { [weak self] result, status in
            Task { await self?.launchUnitEnded(identifier, unit: unit, result: result, exitStatus: status) }
        }
    }

    /// `recordLaunch`: the session's launch record, journaled in its turn (submitted: a failure is logged).
    func recordLaunch(_ identifier: String, _ record: SessionLaunchRecord?) {
        journal.submitting { try $0.setSessionLaunch(identifier, record) }
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
        feedAndRun(.subscribersChanged(identifier, count: subscribers[identifier]?.count ?? 0))
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

    /// Rows deleted per transaction, and transactions per sweep: a sweep holds the actor for a bounded time;
    /// what is left goes on at the next tick.
    static let retentionBatch = 2_000
    static let retentionBatchesPerSweep = 5
    /// Events acknowledged at once past which the WAL is truncated right after (`Journal.truncateWAL`).
    static let largeAcknowledgement = 10_000

    /// `sweepRetention`: deletes the finished tasks the sweeps allow (acknowledged, their session's
    /// `finishedTaskRetention` passed, not in memory), with their data-task bodies, in batches within a budget
    /// (what is left goes on at the next tick: `retentionSwept(backlog: true)`), and gives the freed pages back to
    /// the file system. The cost follows the sessions with finished tasks and the rows deleted, not how many tasks
    /// there are.
    func sweepRetention(_ sweeps: [RetentionSweep]) {
        var budget = Self.retentionBatchesPerSweep
        var deletedAny = false
        var unfinishedWork = false
        for sweep in sweeps {
            guard budget > 0 else { unfinishedWork = true; break }
            while budget > 0 {
                budget -= 1
                guard let deleted = try? journal.deleteFinishedTasks(session: sweep.session, finishedBefore: sweep.before,
                                                                      limit: Self.retentionBatch, keeping: sweep.keeping)
                else { break }
                let count = deleted.values.reduce(0, +)
                guard count > 0 else { break }
                deletedAny = true
                feedAndRun(.finishedTasksDeleted(sweep.session, deleted))
                logger.debug("finished tasks deleted", metadata: ["session": "\(sweep.session)", "tasks": "\(count)"])
                // A batch short of the limit (less what is kept) was the last one.
                guard count >= Self.retentionBatch - sweep.keeping.count else { break }
                if budget == 0 { unfinishedWork = true }
            }
        }
        if deletedAny { try? journal.releaseFreePages() }
        feedAndRun(.retentionSwept(backlog: unfinishedWork))
    }

    /// `pruneResumeData`: resume data older than `resumeDataLifetime` goes, with its partial file.
    func pruneResumeData(now: Double) {
        let cutoff = now - configuration.resumeDataLifetime
        for token in (try? journal.resumeTokens(createdBefore: cutoff)) ?? [] {
            discardPartial(token.partialPath)
            guard (try? journal.deleteResumeToken(token.token)) != nil,
                  let uid = state.sessions[token.session]?.record.uid else { continue }
            feedAndRun(.resumeDataChanged(uid: uid, kept: -1, inFlight: 0))
        }
    }
}
