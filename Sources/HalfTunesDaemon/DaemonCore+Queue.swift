// The queue: starting tasks within the limits, fairly between users, queue positions (one order for a whole list of tasks), and task.move.
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
    func moveTask(_ p: TaskMoveParams, caller: Caller) async throws(RPCError) -> TaskInfo {
        let t = try await task(p.id, for: caller)
        guard [.queued, .suspended, .waiting].contains(t.machine.state) else {
            throw RPCError.illegalStateChange(task: p.id, from: t.machine.state, action: "move")
        }
        let actions = feed(.edited(p.id, DaemonState.TaskEdit(move: p.to)))
        logger.info("task moved", metadata: ["task": "\(p.id)", "to": "\(p.to.rawValue)"])
        run(actions)
        return info(try await task(p.id, for: caller))
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
