// The scheduler's whole-queue answers, computed the slow, obvious way: the oracles `RunQueue` and the state's
// slot granting are checked against (test code only; the daemon decides task by task with `QueuePlanner.decide`).
@testable import HalfTunesDaemon
import HalfTunesProtocol

extension QueuePlanner {
    /// Shares the queue fairly between users: `ordered` (by priority and queue order) is interleaved by owner,
    /// each next place going to the owner with the fewest transfers running or placed before it; between
    /// equals, to the one served longest ago (`lastServed`: serial numbers of their last slot; never served
    /// first), then to the one whose next task came first. One user's order, priorities included, is kept
    /// among their own tasks, but a user with many `high` tasks cannot keep another user's tasks from their
    /// share of the slots. With one user the order is unchanged.
    static func fairOrder(_ ordered: [(id: Int64, owner: UInt32)], running: [UInt32: Int],
                          lastServed: [UInt32: Int64] = [:]) -> [Int64] {
        var queues: [UInt32: [Int64]] = [:]
        var firstSeen: [UInt32] = []
        var rank: [Int64: Int] = [:]
        for (index, entry) in ordered.enumerated() {
            if queues[entry.owner] == nil { firstSeen.append(entry.owner) }
            queues[entry.owner, default: []].append(entry.id)
            rank[entry.id] = index
        }
        guard firstSeen.count > 1 else { return ordered.map(\.id) }
        var heads: [UInt32: Int] = [:]
        var load = running
        var served = lastServed
        var serial = (lastServed.values.max() ?? 0) + 1
        var result: [Int64] = []
        result.reserveCapacity(ordered.count)
        while result.count < ordered.count {
            var best: (owner: UInt32, key: (Int, Int64, Int))?
            for owner in firstSeen {
                let queue = queues[owner]!, head = heads[owner, default: 0]
                guard head < queue.count else { continue }
                let key = (load[owner, default: 0], served[owner, default: 0], rank[queue[head]]!)
                if best.map({ key < $0.key }) ?? true { best = (owner, key) }
            }
            guard let pick = best else { break }
            result.append(queues[pick.owner]![heads[pick.owner, default: 0]])
            heads[pick.owner, default: 0] += 1
            load[pick.owner, default: 0] += 1
            served[pick.owner] = serial
            serial += 1
        }
        return result
    }

    /// Decides every entry of `queue` (already in order) up to and including `until` (all when nil). With
    /// `stopWhenFull` it stops once the daemon-wide limit is reached (the rest would all be held by it).
    static func plan(queue: [Entry], running: [Running], limits: Limits, until: Int64? = nil,
                     stopWhenFull: Bool = false) -> [(Int64, Decision)] {
        var total = running.count
        var perSession: [String: Int] = [:]
        var perHost: [String: Int] = [:]
        for r in running {
            perSession[r.session, default: 0] += 1
            perHost[r.host, default: 0] += 1
        }
        var decisions: [(Int64, Decision)] = []
        for (index, entry) in queue.enumerated() {
            if stopWhenFull, total >= limits.maxConcurrent { break }
            let decision = decide(entry, ahead: index, running: total, sessionRunning: perSession[entry.session, default: 0],
                                  hostRunning: perHost[entry.host, default: 0], limits: limits)
            if decision == .start {
                total += 1
                perSession[entry.session, default: 0] += 1
                perHost[entry.host, default: 0] += 1
            }
            decisions.append((entry.id, decision))
            if entry.id == until { break }
        }
        return decisions
    }
}
