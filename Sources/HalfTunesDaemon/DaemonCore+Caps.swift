import HalfTunesProtocol

extension DaemonCore {
    /// Refuses a new task when its session, or its owner across all its sessions, holds too many unfinished
    /// tasks, or when the session has too many unacknowledged events: events are never dropped
    /// unacknowledged, so the session must ack first. The task counts are kept by `TaskTable`: O(1). `batch`
    /// holds what earlier creates of the same batch add.
    func checkCapsForNewTask(in s: ManagedSession, batch: CreateBatch = CreateBatch()) throws(RPCError) {
        let identifier = s.record.identifier
        let unfinished = state.tasks.unfinished(session: identifier) + batch.tasksBySession[identifier, default: 0]
        guard unfinished < configuration.maxTasksPerSession else {
            throw RPCError(.limitExceeded, "Session '\(identifier)' already has \(unfinished) unfinished tasks (at most \(configuration.maxTasksPerSession)); wait for some to finish or cancel them")
        }
        let owned = state.tasks.unfinished(owner: s.record.uid) + batch.tasksByUID[s.record.uid, default: 0]
        guard owned < configuration.maxTasksPerUID else {
            throw RPCError(.limitExceeded, "uid \(s.record.uid) already has \(owned) unfinished tasks across its sessions (at most \(configuration.maxTasksPerUID)); wait for some to finish or cancel them")
        }
        let pending = s.pendingEvents + batch.eventsBySession[identifier, default: 0]
        guard pending < configuration.maxPendingEventsPerSession else {
            throw RPCError(.limitExceeded, "Session '\(identifier)' has \(pending) unacknowledged events (at most \(configuration.maxPendingEventsPerSession)); acknowledge delivered events with events.ack to create more tasks")
        }
        let ownerPending = (state.pendingEventsByUID[s.record.uid] ?? 0) + batch.eventsByUID[s.record.uid, default: 0]
        guard ownerPending < configuration.maxPendingEventsPerUID else {
            throw RPCError(.limitExceeded, "uid \(s.record.uid) has \(ownerPending) unacknowledged events across its sessions (at most \(configuration.maxPendingEventsPerUID)); acknowledge delivered events with events.ack to create more tasks")
        }
    }

    /// Refuses a new session when its owner already holds `maxSessionsPerUID` (each session may hold its
    /// own tasks and events, so the per-session caps would otherwise multiply without bound).
    func checkCapsForNewSession(owner: UInt32) throws(RPCError) {
        let held = state.sessions.values.reduce(0) { $0 + ($1.record.uid == owner ? 1 : 0) }
        guard held < configuration.maxSessionsPerUID else {
            throw RPCError(.limitExceeded, "uid \(owner) already has \(held) sessions (at most \(configuration.maxSessionsPerUID)); "
                + "invalidate sessions you no longer use (halftunesctl session invalidate ID)")
        }
    }
}
