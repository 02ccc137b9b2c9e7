// The queue: starting tasks within the limits, fairly between users, queue positions, and task.move.
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    /// Starts queued tasks while the daemon-wide, per-session and per-host limits allow: each next slot goes
    /// to the fair choice among the tasks that can start (`RunQueue.next`). Costs O(owners) per task started
    /// (plus tasks held at the head of a user's queue by a session or host limit), whatever the queue's length.
    func pump() {
        guard !shuttingDown else { return }
        var tried: Set<Int64> = []
        while tasks.running.count < configuration.maxConcurrent {
            let next = tasks.queue.next(running: { self.tasks.runningByOwner[$0] ?? 0 },
                                        lastServed: { self.lastServed[$0] ?? 0 },
                                        isHeld: { self.isHeld($0) })
            guard let entry = next, tried.insert(entry.id).inserted else { return }
            servedSerial += 1
            lastServed[entry.owner] = servedSerial
            _ = try? apply(.slotGranted, to: entry.id)
        }
    }

    /// Whether a queued task cannot start now: its previous transfer is still stopping, or its session or
    /// host is at its limit.
    private func isHeld(_ entry: RunQueue.Entry) -> Bool {
        if tasks.isStopping(entry.id) { return true }
        if let max = sessions[entry.session]?.record.configuration.maxConcurrent,
           (tasks.runningBySession[entry.session] ?? 0) >= max { return true }
        return (tasks.runningByHost[entry.host] ?? 0) >= configuration.maxConnectionsPerHost
    }

    /// Gives a task that enters the queue its place: the back of its priority class, unless it was moved to
    /// the front (a negative queue order, kept until it runs again). `TaskTable` puts it in the queue.
    func enqueue(_ t: inout ManagedTask) {
        if t.record.queueOrder >= 0 {
            t.record.queueOrder = nextQueueOrder
            nextQueueOrder += 1
        }
    }

    /// A queued task's place in the shared order (1 = next); nil for any other state.
    func queuePosition(_ id: Int64) -> Int? {
        guard tasks.queue.contains(id) else { return nil }
        if let memo = positionsMemo { return memo[id] }
        return tasks.queue.position(of: id, running: tasks.runningByOwner, lastServed: lastServed)
    }

    /// `task.move`: the front or back of its priority class. A queued task moves at once; a suspended or
    /// waiting one gets that place when it is queued again.
    func moveTask(_ p: TaskMoveParams, caller: Caller) throws(RPCError) -> TaskInfo {
        var t = try task(p.id, for: caller)
        guard [.queued, .suspended, .waiting].contains(t.machine.state) else {
            throw RPCError.illegalStateChange(task: p.id, from: t.machine.state, action: "move")
        }
        switch p.to {
        case .front:
            let lowest = tasks.queue.lowestOrder(priority: t.record.priority, excluding: p.id)
            t.record.queueOrder = QueuePlanner.frontOrder(among: lowest.map { [$0] } ?? [])
        case .back:
            t.record.queueOrder = nextQueueOrder
            nextQueueOrder += 1
        }
        t.record.updatedAt = clock()
        tasks[p.id] = t
        try saveRow(p.id)
        logger.info("task moved", metadata: ["task": "\(p.id)", "to": "\(p.to.rawValue)"])
        pump()
        return info(try task(p.id, for: caller))
    }
}
