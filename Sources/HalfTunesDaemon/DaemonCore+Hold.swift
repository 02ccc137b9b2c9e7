// Why a queued task is not running yet (TaskInfo.hold), from the same limit checks that start tasks.
import HalfTunesProtocol

extension DaemonCore {
    /// Why a queued task is not running yet; nil for any other state. O(1): the running counts are indexes,
    /// and after every scheduler pass a queued task is held by a limit unless the daemon is full.
    func hold(_ t: ManagedTask, position: Int?) -> TaskHold? {
        guard t.machine.state == .queued else { return nil }
        if state.shuttingDown { return TaskHold(reason: "shuttingDown", message: "The daemon is shutting down") }
        if let begin = t.deferredUntil {
            return TaskHold(reason: "earliestBeginDate",
                            message: "It does not begin before \(Timestamp.format(begin)) (its earliestBeginDate)")
        }
        guard let position else {
            return TaskHold(reason: "queue", message: "It is about to take its place in the queue")
        }
        let session = t.record.session, host = t.hostKey
        var limits = QueuePlanner.Limits(maxConcurrent: configuration.maxConcurrent,
                                         maxConnectionsPerHost: configuration.maxConnectionsPerHost)
        if let max = state.sessions[session]?.record.configuration.maxConcurrent { limits.sessionMaxConcurrent[session] = max }
        let entry = QueuePlanner.Entry(id: t.id, session: session, host: host, stopping: t.attemptInFlight)
        let decision = QueuePlanner.decide(entry, ahead: position - 1, running: state.tasks.running.count,
                                           sessionRunning: state.tasks.runningBySession[session] ?? 0,
                                           hostRunning: state.connections(host: host), limits: limits)
        switch decision {
        case .hold(let hold):
            return hold
        case .start:
            // Between two scheduler passes: a slot is free and it starts at the next one.
            let ahead = position - 1
            return TaskHold(reason: "queue", message: ahead == 0
                ? "It is next and starts as soon as the scheduler runs"
                : "\(ahead) task\(ahead == 1 ? "" : "s") ahead in the queue")
        }
    }
}

extension DaemonCore {
    /// Describes many tasks, working out the queue's shared order once for all of them when several users
    /// have queued tasks (not once per queued task).
    func infos(_ list: [ManagedTask]) -> [TaskInfo] {
        if state.tasks.queue.owners.count > 1, list.contains(where: { $0.machine.state == .queued }) {
            let order = state.tasks.queue.fairOrder(running: state.tasks.runningByOwner, lastServed: state.lastServed)
            positionsMemo = Dictionary(uniqueKeysWithValues: order.enumerated().map { ($1, $0 + 1) })
        }
        defer { positionsMemo = nil }
        return list.map(info)
    }
}
