// The queue: starting tasks within the limits, fairly between users, queue positions, and task.move.
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    /// Starts queued tasks while the limits allow, fairly between users (`DaemonState.grantSlots`).
    func pump() {
        feedAndRun(.grantSlots)
    }

    /// A queued task's place in the shared order (1 = next); nil for any other state.
    func queuePosition(_ id: Int64) -> Int? {
        guard state.tasks.queue.contains(id) else { return nil }
        if let memo = positionsMemo { return memo[id] }
        return state.tasks.queue.position(of: id, running: state.tasks.runningByOwner, lastServed: state.lastServed)
    }

    /// `task.move`: the front or back of its priority class. A queued task moves at once; a suspended or
    /// waiting one gets that place when it is queued again.
    func moveTask(_ p: TaskMoveParams, caller: Caller) throws(RPCError) -> TaskInfo {
        let t = try task(p.id, for: caller)
        guard [.queued, .suspended, .waiting].contains(t.machine.state) else {
            throw RPCError.illegalStateChange(task: p.id, from: t.machine.state, action: "move")
        }
        let actions = feed(.edited(p.id, DaemonState.TaskEdit(move: p.to)))
        logger.info("task moved", metadata: ["task": "\(p.id)", "to": "\(p.to.rawValue)"])
        run(actions)
        return info(try task(p.id, for: caller))
    }
}
