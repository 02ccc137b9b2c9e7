import HalfTunesProtocol

extension DaemonCore {
    /// Refuses a new task when its session holds too many unfinished tasks, or has too many
    /// unacknowledged events: events are never dropped unacknowledged, so the session must ack first.
    func checkCapsForNewTask(in s: ManagedSession) throws(RPCError) {
        let identifier = s.record.identifier
        let unfinished = tasks.values.reduce(0) { $0 + ($1.record.session == identifier && !$1.machine.state.isTerminal ? 1 : 0) }
        guard unfinished < configuration.maxTasksPerSession else {
            throw RPCError(.limitExceeded, "Session '\(identifier)' already has \(unfinished) unfinished tasks (at most \(configuration.maxTasksPerSession)); wait for some to finish or cancel them")
        }
        let pending = try journaled { try journal.eventCount(session: identifier) }
        guard pending < configuration.maxPendingEventsPerSession else {
            throw RPCError(.limitExceeded, "Session '\(identifier)' has \(pending) unacknowledged events (at most \(configuration.maxPendingEventsPerSession)); acknowledge delivered events with events.ack to create more tasks")
        }
    }

    /// Refuses a new session when its owner already holds `maxSessionsPerUID` (each session may hold its
    /// own tasks and events, so the per-session caps would otherwise multiply without bound).
    func checkCapsForNewSession(owner: UInt32) throws(RPCError) {
        let held = sessions.values.reduce(0) { $0 + ($1.record.uid == owner ? 1 : 0) }
        guard held < configuration.maxSessionsPerUID else {
            throw RPCError(.limitExceeded, "uid \(owner) already has \(held) sessions (at most \(configuration.maxSessionsPerUID)); "
                + "invalidate sessions you no longer use (halftunesctl session invalidate ID)")
        }
    }
}
