// Sessions, their events and edits of a task's row as inputs of the core's state (the journal is the runner's).
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonState {
    /// `session.open`'s answer (`sessionOpen`).
    enum SessionOpening: Equatable, Sendable {
        /// An active session of that identifier exists and its configuration stays.
        case reattached
        /// It exists and takes the new configuration once its row (`writeSession`, next) is written: the caller
        /// feeds `sessionConfigured` with this ticket then.
        case reconfiguring(ticket: UInt64)
        /// A new session, in the state from now on; its row (`writeSession`, next) is being written: if that fails
        /// the caller feeds `sessionRemoved` with its `createdAt`.
        case opened
        case refused(SessionRefusal)
    }

    enum SessionRefusal: Equatable, Sendable {
        /// Its identifier is being invalidated (reusable once its tasks end).
        case invalidating(String)
        /// The uid holds `held` sessions, the most `max-sessions-per-uid` allows.
        case tooMany(UInt32, held: Int, max: Int)
    }

    /// `session.open` of `record` (its configuration resolved and checked by the runner): reattaches, takes a new
    /// configuration (a ticket: `sessionConfigured` takes only the one written last), or opens a new session
    /// within the uid's cap. Its answer first; then the row to write, if any.
    mutating func opening(_ record: SessionRecord, reconfigure: Bool, into actions: inout [Action]) {
        let id = record.identifier
        if var existing = sessions[id] { // (a copy: the state's session changes only once its row is written)
            guard existing.record.state == .active else { return actions.append(.sessionOpen(.refused(.invalidating(id)))) }
            guard reconfigure, record.configuration != existing.record.configuration else {
                return actions.append(.sessionOpen(.reattached))
            }
            configTicketSerial += 1
            existing.record.configuration = record.configuration
            actions.append(.sessionOpen(.reconfiguring(ticket: configTicketSerial)))
            actions.append(.writeSession(existing.record))
            return
        }
        let held = sessions.identifiers(of: record.uid).count
        guard held < caps.maxSessionsPerUID else {
            return actions.append(.sessionOpen(.refused(.tooMany(record.uid, held: held, max: caps.maxSessionsPerUID))))
        }
        // A session not in the state has no row (the state holds every journaled session), nor events.
        var opened = ManagedSession(record: record, lastEventSeq: 0, pendingEvents: 0)
        opened.configApplied = configTicketSerial // no reconfiguration handed out before it is its own
        sessions[id] = opened
        proxySettings(session: id, record.configuration)
        actions.append(.sessionOpen(.opened))
        actions.append(.writeSession(record))
    }

    /// Invalidation begins: with `cancelTasks` every unfinished task is canceled, else only the suspended ones
    /// (pending tasks finish; suspended ones would never end). The session accepts nothing new from now on.
    /// Its row (`invalidating`) is written first, before anything its tasks' ends or its deletion write.
    mutating func invalidating(_ identifier: String, cancelTasks: Bool, now: Double, into actions: inout [Action]) {
        guard var s = sessions[identifier] else { return }
        s.record.state = .invalidating
        actions.append(.writeSession(s.record))
        for id in tasks.ids(session: identifier).sorted() {
            guard let state = tasks[id]?.machine.state else { continue }
            if cancelTasks ? !state.isTerminal : state == .suspended {
                _ = try? apply(.sessionInvalidated, to: id, now: now, into: &actions)
            }
        }
        sessions[identifier]?.record.state = .invalidating
        invalidationDone(identifier, into: &actions)
    }

    /// An invalidating session whose tasks have all finished and whose last transfer has stopped is done: the
    /// runner deletes it (`finishInvalidation`, once), which ends in `invalidationFinished`.
    mutating func invalidationDone(_ identifier: String, into actions: inout [Action]) {
        guard let s = sessions[identifier], s.record.state == .invalidating, !s.deleting,
              tasks.unfinished(session: identifier) == 0, tasks.stopping(session: identifier) == 0,
              !makingResumeData(session: identifier) else { return }
        sessions[identifier]?.deleting = true
        actions.append(.finishInvalidation(session: identifier))
    }

    /// The outcome of a `finishInvalidation`: the session's rows and `deletedTokens` tokens are gone from the
    /// journal, and it leaves the state; or (nil) they could not be, and it stays invalidating: the next start (or
    /// anything else that finds it done, such as another `session.invalidate`) asks again.
    mutating func invalidationFinished(_ identifier: String, deletedTokens: Int?, into actions: inout [Action]) {
        guard let s = sessions[identifier], s.deleting else { return }
        guard let deletedTokens else {
            sessions[identifier]?.deleting = false
            return
        }
        Self.add(-deletedTokens, to: &resumeDataKept, s.record.uid)
        removeSession(identifier, into: &actions)
    }

    /// The session is gone (invalidated, its tasks ended and its journal rows deleted; or its new row failed): its
    /// tasks, counts, unacknowledged events, rows and launch record to write again, launch machine and proxy rules go
    /// with it.
    mutating func removeSession(_ identifier: String, into actions: inout [Action]) {
        launches[identifier] = nil
        launchRewrites[identifier] = nil
        proxies.remove(session: identifier)
        guard let s = sessions[identifier] else { return }
        actions.append(.releaseSubscribers(session: identifier))
        countPendingEvents(s, -s.pendingEvents)
        for id in tasks.ids(session: identifier) { tasks[id] = nil }
        tasks.forgetFinished(session: identifier)
        forgetRowRewrites(session: identifier)
        sessions[identifier] = nil
    }

    /// Journaled events of the session, up to `lastSeq`, were stored: they are unacknowledged until acked.
    mutating func eventsJournaled(_ identifier: String, lastSeq: Int64, count: Int) {
        guard var s = sessions[identifier] else { return }
        s.lastEventSeq = max(s.lastEventSeq, lastSeq)
        sessions[identifier] = s
        countPendingEvents(s, count)
    }

    /// The client acknowledged the session's events through `through`: `pruned` of them left the journal, and
    /// with them the response bodies of `droppedBodies`' tasks, which are kept nowhere now.
    mutating func eventsAcknowledged(_ identifier: String, through: Int64, pruned: Int, droppedBodies: [Int64]) {
        for id in droppedBodies { tasks[id]?.record.response?.body = nil }
        guard var s = sessions[identifier] else { return }
        s.record.ackedThrough = max(s.record.ackedThrough, through)
        sessions[identifier] = s
        countPendingEvents(s, -pruned)
    }

    /// Events counted as journaled whose write failed: they are not waiting for an acknowledgement.
    mutating func eventsLost(_ identifier: String, count: Int) {
        guard let s = sessions[identifier] else { return }
        countPendingEvents(s, -count)
    }

    /// Adds `delta` to the session's unacknowledged events and to its owner's.
    private mutating func countPendingEvents(_ s: ManagedSession, _ delta: Int) {
        guard delta != 0 else { return }
        let identifier = s.record.identifier
        sessions[identifier]?.pendingEvents = max(0, s.pendingEvents + delta)
        let total = max(0, (pendingEventsByUID[s.record.uid] ?? 0) + delta)
        pendingEventsByUID[s.record.uid] = total == 0 ? nil : total
    }

    /// A finished task's journal row as a task, owned by its session's user; nil for an unfinished row (the state
    /// has the task itself) or a row of a session the state does not have (nobody's: never shown).
    func finishedTask(_ row: TaskRecord) -> ManagedTask? {
        guard row.state.isTerminal, let s = sessions[row.session] else { return nil }
        return ManagedTask(row: row, owner: s.record.uid)
    }

    /// Whether recovery must look at the row's partial file: an unfinished transfer with durable bytes, which the
    /// file may no longer hold (`taskRestored`'s `partialLength`).
    static func partialMayBeShort(_ row: TaskRecord) -> Bool {
        !row.state.isTerminal && row.phase == .transfer && row.bytesDurable > 0
    }

    /// A task recovered from the journal joins the state (fed in any order: its journaled queue order is its
    /// place); a running one goes back to the queue and a waiting one to its retry time (`TaskStateMachine`'s
    /// `.restored`); a pending one that ran in each of the daemon's last crashes (`quarantine`) fails instead.
    mutating func restore(_ t: ManagedTask, now: Double, into actions: inout [Action]) {
        var t = withFirstProxy(t)
        Self.deferIfEarly(&t, now: now)
        tasks[t.id] = t
        if t.record.queueOrder >= nextQueueOrder { nextQueueOrder = t.record.queueOrder + 1 }
        // A suspended task needs nothing more (a queued one is in the queue at its journaled place); one being
        // published is finished once the runner looked at its file (`recoverPublish` → `recoveredCompletion`).
        if quarantine.contains(t.id), t.record.state.isPending, t.record.phase == .transfer {
            let error = TaskError(code: TaskErrorCode.quarantined, message: "The daemon crashed "
                + "\(CrashHistory.crashesToQuarantine) times in a row while this task ran, so it was not started again "
                + "(the daemon's log names the signal); create it again to retry")
            _ = try? apply(.quarantined(error), to: t.id, now: now, into: &actions)
            return
        }
        if t.record.phase == .publishing {
            actions.append(.recoverPublish(t.id, partial: t.record.partialPath, location: t.record.location ?? t.record.destination))
        } else if t.record.state == .running || t.record.state == .waiting {
            _ = try? apply(.restored, to: t.id, now: now, into: &actions)
        }
        // What the conditions say now: a queued task may have to wait, one that waited for them may go on.
        if t.record.phase == .transfer { regate(t.id, now: now, into: &actions) }
    }
}
