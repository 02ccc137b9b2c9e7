// Why a queued task is not running yet (TaskInfo.hold), from the rule that starts tasks (QueuePlanner).
import HalfTunesProtocol

extension DaemonState {
    /// Why a queued task is not running yet; nil for any other state. O(1): the running counts are indexes,
    /// and after every scheduler pass a queued task is held by a limit unless the daemon is full.
    func hold(_ t: ManagedTask, position: Int?) -> TaskHold? {
        guard t.machine.state == .queued else { return nil }
        if shuttingDown { return TaskHold(reason: "shuttingDown", message: "The daemon is shutting down") }
        if let begin = t.deferredUntil {
            return TaskHold(reason: "earliestBeginDate",
                            message: "It does not begin before \(Timestamp.format(begin)) (its earliestBeginDate)")
        }
        guard let position else {
            return TaskHold(reason: "queue", message: "It is about to take its place in the queue")
        }
        let session = t.record.session, host = t.hostKey
        var planner = QueuePlanner.Limits(maxConcurrent: limits.maxConcurrent,
                                          maxConnectionsPerHost: limits.maxConnectionsPerHost)
        if let max = sessions[session]?.record.configuration.maxConcurrent { planner.sessionMaxConcurrent[session] = max }
        let entry = QueuePlanner.Entry(id: t.id, session: session, host: host, stopping: t.attemptInFlight, data: t.isData)
        let decision = QueuePlanner.decide(entry, ahead: position - 1, running: tasks.running.count,
                                           sessionRunning: tasks.runningBySession[session] ?? 0,
                                           hostRunning: connections(host: host),
                                           proxiesInUse: proxies.holds(owner: t.owner, t.firstProxy),
                                           dataHeld: tasks.runningDataBytesByOwner[t.owner] ?? 0, limits: planner)
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
