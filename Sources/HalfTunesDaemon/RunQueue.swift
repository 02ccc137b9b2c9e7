// The queue of tasks waiting for a transfer slot, kept in start order as tasks enter and leave it.
import HalfTunesProtocol

/// The queued tasks, one ordered run per owner uid (by priority, then queue order, then id), and the same per
/// lane (an owner's tasks of one session through one first proxy) and host in it (`LaneRun`), maintained as
/// tasks are queued and dequeued, so that choosing the next task to start costs, per owner, its first few tasks
/// and a look at each of its lanes and each held host in them, and never sorts or walks the whole queue. `TaskTable` keeps it in step
/// with task states: a task is in the queue exactly while it is `queued`.
///
/// Between users the queue is shared as `QueuePlanner.fairOrder` describes: the next place goes to the user
/// with the fewest transfers running, then to the one served longest ago, then to the one whose next task came
/// first. `next` applies that rule to the tasks that can start; `position(of:)` to all of them (what
/// `queuePosition` and `hold` show). A pure value: no I/O, no clock.
struct RunQueue: Sendable {
    /// The sort key of a queued task: priority class first, then queue order, then id (unique).
    struct Key: Comparable, Hashable, Sendable {
        var rank: Int
        var order: Int64
        var id: Int64

        init(priority: TaskPriority, order: Int64, id: Int64) {
            self.rank = priority.rank
            self.order = order
            self.id = id
        }

        static func < (a: Key, b: Key) -> Bool { (a.rank, a.order, a.id) < (b.rank, b.order, b.id) }
    }

    struct Entry: Sendable, Equatable {
        var key: Key
        var owner: UInt32
        var session: String
        /// `HostKey.of(url)`: the per-host limit's key.
        var host: String
        /// The proxy its first request goes through (nil: direct): the per-uid proxy cap's key.
        var proxy: ProxyRef? = nil
        /// A data task: the per-uid budget of response bodies in memory holds it (`QueuePlanner.maxDataBytesPerUID`).
        var data = false
        var id: Int64 { key.id }
    }

    /// The tasks of one owner that a session limit, the proxy cap or the data-memory budget holds together: one
    /// session, one first proxy, data tasks or not. An owner has at most six per session (direct, its http and its
    /// https proxy, each for data tasks and the others), and at most
    /// `maxSessionsPerUID` sessions.
    struct Lane: Hashable, Sendable {
        var session: String
        var proxy: ProxyRef?
        var data: Bool
    }

    /// Each owner's queued tasks in start order.
    private var byOwner: [UInt32: SortedRun<Entry>] = [:]
    /// The same tasks per owner and lane, each lane's per host in start order: a scheduler pass skips a held lane
    /// whole, and a held host in a lane not held.
    private var lanes: [UInt32: [Lane: LaneRun]] = [:]
    /// How many of an owner's first tasks `next` looks at one by one before it goes lane by lane.
    static let scanBeforeLanes = 8
    /// Where each queued task is (its owner and key), for removal and lookups.
    private var members: [Int64: (owner: UInt32, key: Key)] = [:]

    var count: Int { members.count }
    var isEmpty: Bool { members.isEmpty }
    func contains(_ id: Int64) -> Bool { members[id] != nil }

    /// Adds a task (replacing its earlier entry, if any). Appends are O(1): queue orders only grow, except a
    /// task moved to the front, which goes to the front; elsewhere `SortedRun.insert`.
    mutating func insert(_ entry: Entry) {
        remove(entry.id)
        byOwner[entry.owner, default: SortedRun()].insert(entry)
        members[entry.id] = (entry.owner, entry.key)
        let lane = Lane(session: entry.session, proxy: entry.proxy, data: entry.data)
        lanes[entry.owner, default: [:]][lane, default: LaneRun()].insert(entry.key, host: entry.host)
    }

    /// Takes a task out of the queue (nothing when it is not in it): `SortedRun.remove` in its owner's run and
    /// in its lane's host.
    mutating func remove(_ id: Int64) {
        guard let (owner, key) = members.removeValue(forKey: id), var run = byOwner.removeValue(forKey: owner) else { return }
        if let removed = run.remove(key) {
            removeFromLane(Lane(session: removed.session, proxy: removed.proxy, data: removed.data), owner: owner, key: key,
                           host: removed.host)
        }
        if !run.isEmpty { byOwner[owner] = run }
    }

    private mutating func removeFromLane(_ lane: Lane, owner: UInt32, key: Key, host: String) {
        guard var run = lanes[owner]?.removeValue(forKey: lane) else { return }
        run.remove(key, host: host)
        if !run.isEmpty {
            lanes[owner]![lane] = run
        } else if lanes[owner]!.isEmpty {
            lanes[owner] = nil
        }
    }

    /// The entry of a queued task.
    func entry(_ id: Int64) -> Entry? {
        guard let (owner, key) = members[id] else { return nil }
        return byOwner[owner]?.item(key)
    }

    /// The lowest queue order among queued tasks of `priority` (every owner's), for `task.move --front`.
    func lowestOrder(priority: TaskPriority, excluding id: Int64) -> Int64? {
        var lowest: Int64?
        for run in byOwner.values {
            for entry in run.items(from: Key(priority: priority, order: .min, id: .min)) {
                guard entry.key.rank == priority.rank else { break }
                if entry.id != id {
                    lowest = min(lowest ?? .max, entry.key.order)
                    break
                }
            }
        }
        return lowest
    }

    /// The next task to start: the fair choice among, for each owner, the first of its tasks that `isHeld`
    /// does not hold (a session or host at its limit, its owner at the proxy cap, a previous transfer still
    /// stopping). `running` and `lastServed` give each owner's transfers running and the serial number of its
    /// last slot (0: never). `laneHeld` tells whether every task of a lane is held (its session at its limit, its
    /// proxy one too many), `hostHeld` whether every task to a host is (its connections at the limit): neither
    /// may ever say so of a task `isHeld` would let start.
    ///
    /// Cost per owner: its first `scanBeforeLanes` tasks; past them, one look per lane, and in each lane not held
    /// one look per host held plus the tasks passed over one by one (a transfer stopping). So 50,000 tasks behind
    /// a session's limit, a host's or the proxy cap cost one look each pass, not 50,000.
    func next(running: (UInt32) -> Int, lastServed: (UInt32) -> Int64, isHeld: (Entry) -> Bool,
              laneHeld: (UInt32, Lane) -> Bool = { _, _ in false },
              hostHeld: (String) -> Bool = { _ in false }) -> Entry? {
        var best: (entry: Entry, load: Int, served: Int64)?
        for (owner, run) in byOwner {
            guard let entry = first(of: owner, run, isHeld: isHeld, laneHeld: laneHeld, hostHeld: hostHeld) else { continue }
            let load = running(owner), served = lastServed(owner)
            if let b = best, (b.load, b.served, b.entry.key) < (load, served, entry.key) { continue }
            best = (entry, load, served)
        }
        return best?.entry
    }

    /// The first task of `owner`'s run that `isHeld` lets start: `run.first(where:)` for its first tasks; past
    /// them, the earliest of each lane's first such task (`LaneRun.first`, each lane looked at only up to the
    /// earliest found so far) among the lanes `laneHeld` does not hold — the same task, since the lanes split the
    /// run and a held lane's tasks are all held.
    private func first(of owner: UInt32, _ run: SortedRun<Entry>, isHeld: (Entry) -> Bool,
                       laneHeld: (UInt32, Lane) -> Bool, hostHeld: (String) -> Bool) -> Entry? {
        for entry in run.prefix(Self.scanBeforeLanes) where !isHeld(entry) { return entry }
        guard run.count > Self.scanBeforeLanes, let ownLanes = lanes[owner] else { return nil }
        var best: Entry?
        for (lane, laneRun) in ownLanes where !laneHeld(owner, lane) {
            let found = laneRun.first(before: best?.key, isHeld: { key, host in
                isHeld(Entry(key: key, owner: owner, session: lane.session, host: host, proxy: lane.proxy, data: lane.data))
            }, hostHeld: hostHeld)
            guard let found else { continue } // before `best`, or nil
            best = Entry(key: found.key, owner: owner, session: lane.session, host: found.host, proxy: lane.proxy,
                         data: lane.data)
        }
        return best
    }

    /// The task's place in the shared order (1 = next), or nil when it is not queued: where the fair rule of
    /// `next`, applied to every queued task, puts it. O(owners × log n + the run's chunks), worked out rather than followed:
    ///
    /// Each next place goes to the owner with the fewest transfers running or placed (its *level*), then the one
    /// served longest ago, then the earliest task. So places go level by level; an owner takes part in levels
    /// `running ..< running + queued`, once each. Within a level the owners who join at it come first (their
    /// `lastServed` is older than any place given in the walk), by `lastServed` then first task, followed by the
    /// others in the order of the level before. Which gives, for any two owners in one level, the order of
    /// (−running, lastServed, first task). The task is its owner's `k`th, placed at level `running + k`: before it
    /// are its owner's `k`, every other owner's places at lower levels, and one more for each owner ahead of its
    /// owner in that level.
    func position(of id: Int64, running: [UInt32: Int], lastServed: [UInt32: Int64]) -> Int? {
        guard let (owner, key) = members[id], let run = byOwner[owner] else { return nil }
        let k = run.count(below: key)
        guard byOwner.count > 1 else { return k + 1 }
        let joined = running[owner, default: 0], level = joined + k
        let mine = (-joined, lastServed[owner, default: 0], run.first!.key)
        var position = k + 1
        for (other, otherRun) in byOwner where other != owner {
            let from = running[other, default: 0]
            position += min(max(level - from, 0), otherRun.count)
            if from <= level, level < from + otherRun.count,
               (-from, lastServed[other, default: 0], otherRun.first!.key) < mine { position += 1 }
        }
        return position
    }

}

/// An item of a `SortedRun`: a queued task's entry (an owner's `RunQueue.Entry`, a host's `RunQueue.Key` in a lane), or a
/// task id.
protocol KeyedEntry {
    associatedtype SortKey: Comparable
    var key: SortKey { get }
}

extension RunQueue.Entry: KeyedEntry {}
extension RunQueue.Key: KeyedEntry {
    var key: RunQueue.Key { self }
}

/// A task id is its own key: a `SortedRun<Int64>` is a set of ids in order (`StateIDIndex`).
extension Int64: KeyedEntry {
    var key: Int64 { self }
}
