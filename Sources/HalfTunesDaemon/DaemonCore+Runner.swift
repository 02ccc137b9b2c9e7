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
    func apply(_ input: TaskStateMachine.Input, to id: Int64) throws(RPCError) -> ManagedTask? {
        guard state.tasks[id] != nil else {
            // A finished task lives in the journal only: it refuses every input as its state machine would.
            guard var finished = finishedTask(id)?.machine else { throw RPCError.unknownTask(id) }
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
}
