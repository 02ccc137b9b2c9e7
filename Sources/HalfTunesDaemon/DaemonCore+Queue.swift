// The queue: its order (priority, then queue order), starting tasks within the limits, and task.move.
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    /// Starts queued tasks, in queue order, while the daemon-wide, per-session and per-host limits allow.
    func pump() {
        guard !shuttingDown else { return }
        queue.removeAll { tasks[$0]?.machine.state != .queued }
        sortQueue()
        for (id, decision) in plan(startsOnly: true) where decision == .start {
            queue.removeAll { $0 == id }
            if let t = tasks[id] {
                servedSerial += 1
                lastServed[owner(of: t)] = servedSerial
            }
            _ = try? apply(.slotGranted, to: id)
        }
    }

    /// Puts the queue in start order: priority class, then queue order, then id; then shared fairly between
    /// the users who own the tasks (`QueuePlanner.fairOrder`).
    func sortQueue() {
        queue.sort { a, b in
            guard let ta = tasks[a]?.record, let tb = tasks[b]?.record else { return a < b }
            return QueuePlanner.precedes((ta.priority, ta.queueOrder, a), (tb.priority, tb.queueOrder, b))
        }
        var running: [UInt32: Int] = [:]
        for id in tasks.running { if let t = tasks[id] { running[owner(of: t), default: 0] += 1 } }
        queue = QueuePlanner.fairOrder(queue.compactMap { id in tasks[id].map { (id, owner(of: $0)) } }, running: running,
                                       lastServed: lastServed)
    }

    private func owner(of t: ManagedTask) -> UInt32 {
        sessions[t.record.session]?.record.uid ?? SessionNames.owner(of: t.record.session) ?? 0
    }

    /// Gives a task that enters the queue its place: the back of its priority class, unless it was moved to
    /// the front (a negative queue order, kept until it runs again).
    func enqueue(_ t: inout ManagedTask) {
        if t.record.queueOrder >= 0 {
            t.record.queueOrder = nextQueueOrder
            nextQueueOrder += 1
        }
        if !queue.contains(t.id) { queue.append(t.id) }
    }

    /// The scheduler's decisions for the queue as it is: up to task `until` when given; with `startsOnly`,
    /// only as far as a task can still start (it stops once the daemon-wide limit is reached).
    func plan(until: Int64? = nil, startsOnly: Bool = false) -> [(Int64, QueuePlanner.Decision)] {
        var running: [QueuePlanner.Running] = []
        for id in tasks.running {
            guard let session = tasks[id]?.record.session else { continue }
            running.append(QueuePlanner.Running(session: session, host: hostKey(id)))
        }
        let limits = plannerLimits
        if startsOnly, running.count >= limits.maxConcurrent { return [] }
        var entries: [QueuePlanner.Entry] = []
        for id in queue {
            guard let t = tasks[id], t.machine.state == .queued else { continue }
            entries.append(QueuePlanner.Entry(id: id, session: t.record.session, host: hostKey(id),
                                              stopping: t.runtime != nil))
            if id == until { break }
        }
        return QueuePlanner.plan(queue: entries, running: running, limits: limits, until: until,
                                 stopWhenFull: startsOnly)
    }

    /// The per-host limit's key of a task, cached in the task.
    func hostKey(_ id: Int64) -> String {
        if let key = tasks[id]?.hostKey { return key }
        let key = HostKey.of(tasks[id]?.record.url ?? "")
        tasks[id]?.hostKey = key
        return key
    }

    var plannerLimits: QueuePlanner.Limits {
        var perSession: [String: Int] = [:]
        for (identifier, s) in sessions {
            if let max = s.record.configuration.maxConcurrent { perSession[identifier] = max }
        }
        return QueuePlanner.Limits(maxConcurrent: configuration.maxConcurrent,
                                   maxConnectionsPerHost: configuration.maxConnectionsPerHost,
                                   sessionMaxConcurrent: perSession)
    }

    /// `task.move`: the front or back of its priority class. A queued task moves at once; a suspended or
    /// waiting one gets that place when it is queued again.
    func moveTask(_ p: TaskMoveParams) throws(RPCError) -> TaskInfo {
        var t = try task(p.id)
        guard [.queued, .suspended, .waiting].contains(t.machine.state) else {
            throw RPCError.illegalStateChange(task: p.id, from: t.machine.state, action: "move")
        }
        switch p.to {
        case .front:
            let others = tasks.values.filter {
                $0.id != p.id && $0.machine.state == .queued && $0.record.priority == t.record.priority
            }.map(\.record.queueOrder)
            t.record.queueOrder = QueuePlanner.frontOrder(among: others)
        case .back:
            t.record.queueOrder = nextQueueOrder
            nextQueueOrder += 1
        }
        t.record.updatedAt = clock()
        tasks[p.id] = t
        try saveRow(p.id)
        logger.info("task moved", metadata: ["task": "\(p.id)", "to": "\(p.to.rawValue)"])
        pump()
        return info(try task(p.id))
    }
}
