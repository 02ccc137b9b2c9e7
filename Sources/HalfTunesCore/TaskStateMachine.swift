import HalfTunesProtocol

/// The lifecycle of one task as a value type: it takes inputs (client requests, scheduler and transfer
/// outcomes, timers) with the current time, and returns the actions the daemon must carry out. No I/O.
public struct TaskStateMachine: Sendable, Equatable {
    public private(set) var state: TaskState
    /// Set while `waiting`.
    public private(set) var waitingReason: TaskError?
    public private(set) var nextAttemptAt: Double?
    /// Set when `failed` or `canceled`.
    public private(set) var error: TaskError?
    /// Transient failures since the last attempt that made progress; drives the backoff.
    public private(set) var consecutiveFailures: Int
    /// The task fails with `resourceTimeout` when a retry would start after this time.
    public let resourceDeadline: Double?
    /// The session's retry policy; the daemon keeps it current (a re-opened session may change it).
    public var backoff: Backoff

    public enum Input: Sendable, Equatable {
        /// Client `task.resume` (also "retry now" for a waiting task).
        case resume
        /// Client `task.suspend` (pause, keeping partial data).
        case suspend
        /// Client `task.cancel`; `keepPartial` when resume data is produced.
        case cancel(keepPartial: Bool)
        /// The scheduler gives a queued task a transfer slot.
        case slotGranted
        /// The transfer finished and the file was published.
        case completed
        /// The transfer failed. `jitterSample` is a random number in [0, 1) drawn by the caller (the machine
        /// itself has no randomness); 0.5 means no jitter.
        case transferFailed(TaskError, transient: Bool, retryAfter: Double?, jitterSample: Double = 0.5)
        /// The transfer made progress (resets the backoff).
        case madeProgress
        /// The retry timer fired.
        case retryDue
        /// The daemon started and found the task in the journal.
        case restored
        /// The session is being invalidated with cancellation.
        case sessionInvalidated
        /// The resource deadline passed (checked by a timer while the task is pending).
        case resourceDeadlinePassed
        /// The network or power conditions do not let the task's session transfer now (`ConditionsGate`).
        /// `waits`: a queued or running task waits with `reason` (no failure counted, no retry time; a running
        /// transfer stops) until `conditionsAllow`; otherwise (`waitsForConnectivity: false` and offline) a
        /// queued task fails at once with `reason`, and a running transfer goes on (its connection decides).
        case conditionsBlock(TaskError, waits: Bool)
        /// The conditions let the session transfer again: a task waiting for them is queued (at its old place).
        case conditionsAllow
        /// Daemon start: the daemon crashed in each of its last crashes while this task ran; a pending task fails
        /// with `error` instead of being restored (nothing of it runs at start, so nothing is stopped).
        case quarantined(TaskError)
    }

    public enum Action: Sendable, Equatable {
        case enqueue
        case startTransfer
        case stopTransfer
        case scheduleRetry(at: Double)
        case discardPartial
        case keepPartialForResumeData
        case emitStateChanged(from: TaskState?, to: TaskState, reason: TaskError?)
        case emitComplete(error: TaskError?)
    }

    /// Waiting for the network or power conditions (`conditionsBlock`), not for a retry time.
    public var isWaitingForConditions: Bool {
        state == .waiting && nextAttemptAt == nil && waitingReason.map { TaskErrorCode.conditions.contains($0.code) } == true
    }

    public struct IllegalTransition: Error, Equatable, Sendable {
        public var state: TaskState
        public var input: String

        public init(state: TaskState, input: String) {
            self.state = state
            self.input = input
        }
    }

    public init(state: TaskState, waitingReason: TaskError? = nil, nextAttemptAt: Double? = nil, error: TaskError? = nil,
                consecutiveFailures: Int = 0, resourceDeadline: Double? = nil, backoff: Backoff = Backoff()) {
        self.state = state
        self.waitingReason = waitingReason
        self.nextAttemptAt = nextAttemptAt
        self.error = error
        self.consecutiveFailures = consecutiveFailures
        self.resourceDeadline = resourceDeadline
        self.backoff = backoff
    }

    /// A new task: `suspended`, or `queued` when created with `start: true`.
    public static func created(start: Bool, resourceDeadline: Double?, backoff: Backoff = Backoff())
        -> (TaskStateMachine, [Action])
    {
        var m = TaskStateMachine(state: .suspended, resourceDeadline: resourceDeadline, backoff: backoff)
        var actions: [Action] = [.emitStateChanged(from: nil, to: .suspended, reason: nil)]
        if start {
            actions += (try? m.handle(.resume, now: 0)) ?? []
        }
        return (m, actions)
    }

    public mutating func handle(_ input: Input, now: Double) throws(IllegalTransition) -> [Action] {
        switch (state, input) {
        // resume
        case (.suspended, .resume):
            return move(to: .queued, extra: [.enqueue])
        case (.waiting, .resume):
            return move(to: .queued, extra: [.enqueue])
        case (.queued, .resume), (.running, .resume):
            return []

        // suspend
        case (.running, .suspend):
            return move(to: .suspended, extra: [.stopTransfer])
        case (.queued, .suspend):
            return move(to: .suspended, extra: [])
        case (.waiting, .suspend):
            return move(to: .suspended, extra: [])
        case (.suspended, .suspend):
            return []

        // cancel
        case (.suspended, .cancel(let keep)), (.queued, .cancel(let keep)),
             (.running, .cancel(let keep)), (.waiting, .cancel(let keep)):
            return finishCanceled(keepPartial: keep,
                                  error: TaskError(code: TaskErrorCode.canceled, message: "The task was canceled"))
        case (.suspended, .sessionInvalidated), (.queued, .sessionInvalidated),
             (.running, .sessionInvalidated), (.waiting, .sessionInvalidated):
            return finishCanceled(keepPartial: false,
                                  error: TaskError(code: TaskErrorCode.sessionInvalidated,
                                                   message: "The session was invalidated and its tasks canceled"))

        // scheduler and transfer
        case (.queued, .slotGranted):
            return move(to: .running, extra: [.startTransfer])
        case (.running, .completed):
            waitingReason = nil
            nextAttemptAt = nil
            return move(to: .completed, extra: []) + [.emitComplete(error: nil)]
        case (.running, .madeProgress):
            consecutiveFailures = 0
            return []
        case (.running, .transferFailed(let err, let transient, let retryAfter, let sample)):
            if transient {
                consecutiveFailures += 1
                if backoff.givesUp(after: consecutiveFailures) {
                    let attempts = consecutiveFailures == 1 ? "1 attempt" : "\(consecutiveFailures) attempts in a row"
                    return fail(TaskError(code: err.code, message: "Gave up after \(attempts) without progress "
                                              + "(retry.maxAttempts is \(consecutiveFailures)): \(err.message)",
                                          httpStatus: err.httpStatus))
                }
                let at = now + backoff.delay(failures: consecutiveFailures, retryAfter: retryAfter, jitterSample: sample)
                if let deadline = resourceDeadline, at > deadline {
                    return fail(TaskError(code: TaskErrorCode.resourceTimeout,
                                          message: "Gave up: the resource timeout ends before the next retry (last error: \(err.message))"))
                }
                waitingReason = err
                nextAttemptAt = at
                return move(to: .waiting, extra: [.scheduleRetry(at: at)], reason: err)
            }
            return fail(err)
        case (.waiting, .retryDue) where !isWaitingForConditions:
            if let deadline = resourceDeadline, now > deadline {
                return fail(TaskError(code: TaskErrorCode.resourceTimeout,
                                      message: "The resource timeout expired while waiting to retry"))
            }
            return move(to: .queued, extra: [.enqueue])
        case (_, .retryDue):
            return [] // a stale timer
        case (.queued, .resourceDeadlinePassed), (.running, .resourceDeadlinePassed), (.waiting, .resourceDeadlinePassed):
            guard let deadline = resourceDeadline, now >= deadline else { return [] }
            var actions: [Action] = state == .running ? [.stopTransfer] : []
            actions += fail(TaskError(code: TaskErrorCode.resourceTimeout,
                                      message: "The task did not finish within the session's resource timeout"))
            return actions
        case (_, .resourceDeadlinePassed):
            return [] // suspended tasks do not time out; terminal ones are over

        // daemon start
        case (.running, .quarantined(let err)), (.queued, .quarantined(let err)), (.waiting, .quarantined(let err)):
            waitingReason = nil
            return fail(err)
        case (_, .quarantined):
            return []
        case (.running, .restored):
            return move(to: .queued, extra: [.enqueue])
        case (.queued, .restored):
            return [.enqueue]
        case (.waiting, .restored) where isWaitingForConditions:
            return [] // the daemon checks the conditions again (`conditionsAllow`)
        case (.waiting, .restored):
            return [.scheduleRetry(at: nextAttemptAt ?? now)]
        case (.suspended, .restored), (.completed, .restored), (.failed, .restored), (.canceled, .restored):
            return []

        // network and power conditions
        case (.queued, .conditionsBlock(let reason, let waits)):
            guard waits else { return fail(reason) }
            waitingReason = reason
            return move(to: .waiting, extra: [], reason: reason)
        case (.running, .conditionsBlock(let reason, let waits)):
            guard waits else { return [] }
            waitingReason = reason
            return move(to: .waiting, extra: [.stopTransfer], reason: reason)
        case (.waiting, .conditionsBlock(let reason, let waits)) where isWaitingForConditions:
            guard waits else { return fail(reason) }
            guard reason.code != waitingReason?.code else { return [] }
            waitingReason = reason
            return move(to: .waiting, extra: [], reason: reason)
        case (_, .conditionsBlock):
            return [] // suspended, finished, or waiting for a retry time (the gate is asked again when it is queued)
        case (.waiting, .conditionsAllow) where isWaitingForConditions:
            return move(to: .queued, extra: [.enqueue])
        case (_, .conditionsAllow):
            return []

        default:
            throw IllegalTransition(state: state, input: Self.name(of: input))
        }
    }

    private mutating func move(to newState: TaskState, extra: [Action], reason: TaskError? = nil) -> [Action] {
        let old = state
        state = newState
        if newState != .waiting {
            waitingReason = nil
            nextAttemptAt = nil
        }
        return extra + [.emitStateChanged(from: old, to: newState, reason: reason)]
    }

    private mutating func finishCanceled(keepPartial: Bool, error: TaskError) -> [Action] {
        let old = state
        var actions: [Action] = old == .running ? [.stopTransfer] : []
        actions.append(keepPartial ? .keepPartialForResumeData : .discardPartial)
        self.error = error
        return actions + move(to: .canceled, extra: [], reason: error) + [.emitComplete(error: error)]
    }

    private mutating func fail(_ err: TaskError) -> [Action] {
        error = err
        return [.discardPartial] + move(to: .failed, extra: [], reason: err) + [.emitComplete(error: err)]
    }

    static func name(of input: Input) -> String {
        switch input {
        case .resume: return "resume"
        case .suspend: return "suspend"
        case .cancel: return "cancel"
        case .slotGranted: return "start"
        case .completed: return "complete"
        case .transferFailed: return "fail"
        case .madeProgress: return "record progress for"
        case .retryDue: return "retry"
        case .restored: return "restore"
        case .sessionInvalidated: return "invalidate"
        case .resourceDeadlinePassed: return "time out"
        case .conditionsBlock: return "hold for the network or power conditions"
        case .conditionsAllow: return "release for the network or power conditions"
        case .quarantined: return "quarantine"
        }
    }
}
