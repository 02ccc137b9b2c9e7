// task.update: a task's priority and its own bandwidth limit, changed at any time without restarting it.
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    func updateTask(_ p: TaskUpdateParams, caller: Caller) throws(RPCError) -> TaskInfo {
        var t = try task(p.id, for: caller)
        guard !t.machine.state.isTerminal else {
            throw RPCError.illegalStateChange(task: p.id, from: t.machine.state, action: "update")
        }
        if let limit = p.bandwidthLimit, let problem = ByteRate.problem(with: limit) {
            throw RPCError.invalidParams("bandwidthLimit must be \(problem)")
        }
        if let priority = p.priority { t.record.priority = priority }
        if let limit = p.bandwidthLimit { t.record.bandwidthLimit = limit > 0 ? limit : nil }
        t.record.updatedAt = clock()
        tasks[p.id] = t
        try saveRow(p.id)
        // A running transfer follows its new limit within RateLimiter.maximumWaitSlice.
        if p.bandwidthLimit != nil { t.bandwidth?.setRate(t.record.bandwidthLimit ?? 0) }
        logger.info("task updated", metadata: ["task": "\(p.id)", "priority": "\(t.record.priority.rawValue)",
                                               "bandwidthLimit": "\(t.record.bandwidthLimit ?? 0)"])
        pump()
        return info(try task(p.id, for: caller))
    }

    /// Journals a task's row outside a state change. While a transfer (still) runs, its durable length is
    /// held still so that a concurrent checkpoint is never overwritten by an older value.
    func saveRow(_ id: Int64) throws(RPCError) {
        guard var t = tasks[id] else { throw RPCError.unknownTask(id) }
        guard let runtime = t.runtime else {
            return try journaled { _ = try journal.updateTask(t.record, events: []) }
        }
        let failure: Error? = runtime.withDurableBytes { durable in
            t.record.bytesDurable = durable
            do {
                _ = try journal.updateTask(t.record, events: [])
                return nil
            } catch {
                return error
            }
        }
        tasks[id] = t
        if let failure { try journaled { throw failure } }
    }
}
