// task.update: a task's priority and its own bandwidth limit, changed at any time without restarting it.
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    func updateTask(_ p: TaskUpdateParams, caller: Caller) async throws(RPCError) -> TaskInfo {
        let t = try await task(p.id, for: caller)
        guard !t.machine.state.isTerminal else {
            throw RPCError.illegalStateChange(task: p.id, from: t.machine.state, action: "update")
        }
        if let limit = p.bandwidthLimit, let problem = ByteRate.problem(with: limit) {
            throw RPCError.invalidParams("bandwidthLimit must be \(problem)")
        }
        let actions = feed(.edited(p.id, DaemonState.TaskEdit(priority: p.priority, bandwidthLimit: p.bandwidthLimit)))
        let limit = state.tasks[p.id]?.record.bandwidthLimit
        // A running transfer follows its new limit within RateLimiter.maximumWaitSlice.
        if p.bandwidthLimit != nil { attempts[p.id]?.bandwidth.setRate(limit ?? 0) }
        logger.info("task updated", metadata: ["task": "\(p.id)", "priority": "\((p.priority ?? t.record.priority).rawValue)",
                                               "bandwidthLimit": "\(limit ?? 0)"])
        run(actions)
        return info(try await task(p.id, for: caller))
    }
}
