// Granting transfer slots as the state decides it: the fair next task, and what holds a task, a lane or a host back.
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonState {
    /// Starts queued tasks while the daemon-wide, per-session and per-host limits allow: each next slot goes
    /// to the fair choice among the tasks that can start (`RunQueue.next`). Costs O(owners) per task started
    /// (plus, per owner, when its first tasks are held, a look at each lane of its queue, at each held host in
    /// the lanes not held and at each task whose previous transfer is still stopping), whatever the queue's length.
    mutating func grantSlots(_ limits: SlotLimits, now: Double, into actions: inout [Action]) {
        guard !shuttingDown else { return }
        var tried: Set<Int64> = []
        while tasks.running.count < limits.maxConcurrent {
            let next = tasks.queue.next(running: { self.tasks.runningByOwner[$0] ?? 0 },
                                        lastServed: { self.lastServed[$0] ?? 0 },
                                        isHeld: { self.isHeld($0, limits: limits) },
                                        laneHeld: { self.isHeld(lane: $1, owner: $0) },
                                        hostHeld: { self.isHeld(host: $0, limits: limits) })
            guard let entry = next, tried.insert(entry.id).inserted else { return }
            servedSerial += 1
            lastServed[entry.owner] = servedSerial
            _ = try? apply(.slotGranted, to: entry.id, now: now, into: &actions)
        }
    }

    /// Whether a queued task cannot start now: its previous transfer is still stopping, its session or host is
    /// at its limit, or its owner's attempts already go through as many proxies as one uid may use and it needs
    /// another. O(1): each check reads an index, the task's first proxy is in its queue entry.
    func isHeld(_ entry: RunQueue.Entry, limits: SlotLimits) -> Bool {
        QueuePlanner.ownHold(stopping: tasks.isStopping(entry.id), sessionRunning: tasks.runningBySession[entry.session] ?? 0,
                             sessionMax: sessions[entry.session]?.record.configuration.maxConcurrent,
                             hostRunning: connections(host: entry.host), hostMax: limits.maxConnectionsPerHost,
                             proxiesInUse: proxies.holds(owner: entry.owner, entry.proxy),
                             data: entry.data, dataHeld: tasks.runningDataBytesByOwner[entry.owner] ?? 0) != nil
    }

    /// Whether every task of a queue lane is held: its session is at its limit, or its proxy would be one too
    /// many for its owner (what `isHeld` checks that does not depend on the task's host or its own transfer).
    func isHeld(lane: RunQueue.Lane, owner: UInt32) -> Bool {
        QueuePlanner.sessionHold(running: tasks.runningBySession[lane.session] ?? 0,
                                 max: sessions[lane.session]?.record.configuration.maxConcurrent) != nil
            || proxies.holds(owner: owner, lane.proxy) != nil
            || QueuePlanner.dataHold(data: lane.data, held: tasks.runningDataBytesByOwner[owner] ?? 0) != nil
    }

    /// Whether every task to `host` is held: its connections are at the per-host limit (what `isHeld` checks of
    /// the task's host).
    func isHeld(host: String, limits: SlotLimits) -> Bool {
        QueuePlanner.hostHold(running: connections(host: host), max: limits.maxConnectionsPerHost) != nil
    }

    /// Connections in use to `host`: one per running task, plus the extras of split downloads.
    func connections(host: String) -> Int {
        (tasks.runningByHost[host] ?? 0) + (extrasByHost[host] ?? 0)
    }

    /// After each input: every host whose running or queued tasks it changed (`TaskTable.changedHosts`) and whose
    /// allowance of extra connections is now another than the one it was last given gets it (`hostAllowance`, in
    /// host order). O(hosts changed), never all hosts.
    mutating func allowancesChanged(into actions: inout [Action]) {
        let changed = tasks.changedHosts
        guard !changed.isEmpty else { return }
        // Sorted for a replay's sake (a set's order is the process's), but not the usual single host: most inputs
        // change one host, and a sort would allocate an array for it on every resume, suspend and cancel.
        if changed.count == 1, let host = changed.first {
            giveAllowance(host, into: &actions)
        } else {
            for host in changed.sorted() { giveAllowance(host, into: &actions) }
        }
    }

    private mutating func giveAllowance(_ host: String, into actions: inout [Action]) {
        let allowance = extraAllowance(host: host, limits: limits)
        guard allowance != hostAllowances[host] ?? 0 else { return }
        hostAllowances[host] = allowance == 0 ? nil : allowance
        actions.append(.hostAllowance(host, extras: allowance))
    }

    /// How many extra connections `host` may have in all (`HostConnections`' allowance): what the per-host
    /// limit leaves after one per running task, and none while a task for the host is queued.
    func extraAllowance(host: String, limits: SlotLimits) -> Int {
        let running = tasks.runningByHost[host] ?? 0
        guard running > 0, (tasks.queuedByHost[host] ?? 0) == 0 else { return 0 }
        return max(0, limits.maxConnectionsPerHost - running)
    }
}
