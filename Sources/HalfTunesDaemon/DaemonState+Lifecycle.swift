// A task's lifecycle inputs in the core's state: its machine's steps turned into journal rows, queue places and the retry timer.
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonState {
    /// A client's suspend or cancel waits for a move into place to end (`heldWhileMoving`); every other input
    /// is ignored meanwhile (`apply`).
    static func waitsForAMove(_ input: TaskStateMachine.Input) -> Bool {
        switch input {
        case .suspend, .cancel: true
        default: false
        }
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
                t.partialMayExist = true // the attempt opens (or makes) it
                t.record.attempts += 1 // journaled with the start, so a crash never loses an attempt's count
                t.attemptInFlight = true
                proxies.attemptStarted(id, owner: t.owner, proxy: t.firstProxy)
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
                } else if t.partialMayExist {
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
        let row = t.record.written()
        tasks[id] = t
        if retryScheduled { armRetryTimer(into: &actions) }
        actions.append(.journal(row, payloads))
        leaveCompletionIfStopped(id)
        if startNow { actions.append(.startAttempt(id)) }
        if t.machine.state.isTerminal { invalidationDone(t.record.session, into: &actions) }
        evict(id) // a finished task lives in the journal only
        // A task queued again (resumed, retrying, restored) waits instead while its session may not transfer.
        if t.machine.state == .queued, t.deferredUntil == nil, !mayTransfer(session: t.record.session) {
            regate(id, now: now, into: &actions)
        }
        return steps
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

    /// Sets the runner's one retry timer for the earliest retry of any waiting task, unless it is set for that
    /// time or earlier already (it fires early then, and is set again for the earliest retry left). None while
    /// shutting down.
    mutating func armRetryTimer(into actions: inout [Action]) {
        guard !shuttingDown, let at = tasks.earliestRetry else { return }
        if let armed = retryTimerAt, armed <= at { return }
        retryTimerAt = at
        actions.append(.armRetryTimer(at: at))
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
