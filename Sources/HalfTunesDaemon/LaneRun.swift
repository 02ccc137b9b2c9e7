// One queue lane's tasks per host, the hosts ordered by their first task: a pass skips a held host whole.
import HeapModule

/// The queued tasks of one `RunQueue.Lane` (an owner's tasks of one session through one first proxy), grouped
/// by host, each host's in start order, and the hosts in an indexed binary min-heap by their first task's key.
/// `first(isHeld:hostHeld:)` visits the tasks in start order but skips a host `hostHeld` holds whole, so the
/// tasks a host's limit holds cost one look per host, not one per task. A pure value: no I/O, no clock.
/// `RunQueue` keeps it: a key is inserted only when it is not in the lane (it removes a task before inserting it
/// again).
struct LaneRun: Sendable {
    /// One host's tasks after its first (which is in `heads`), in start order, and where the host sits in
    /// `heads`. A host that has only ever had one task allocates no run (an empty `SortedRun` has no chunk).
    private struct HostRun: Sendable {
        var rest = SortedRun<RunQueue.Key>()
        var slot: Int
    }

    private struct Head: Sendable {
        var key: RunQueue.Key
        var host: String
    }

    private var hosts: [String: HostRun] = [:]
    /// Each host's first task, a binary min-heap by key (`hosts[host].slot` is its index).
    private var heads: [Head] = []

    var isEmpty: Bool { heads.isEmpty }

    /// Adds a task. An append to its host's run (queue orders only grow) costs two hash lookups; a task that
    /// becomes its host's first moves the host up the heap, O(log hosts).
    mutating func insert(_ key: RunQueue.Key, host: String) {
        guard var run = hosts.removeValue(forKey: host) else {
            hosts[host] = HostRun(slot: heads.count)
            heads.append(Head(key: key, host: host))
            siftUp(heads.count - 1)
            return
        }
        let slot = run.slot
        if key < heads[slot].key {
            run.rest.insert(heads[slot].key)
            hosts[host] = run
            heads[slot].key = key
            siftUp(slot)
        } else {
            run.rest.insert(key)
            hosts[host] = run
        }
    }

    /// Takes a task out (nothing when it is not in the lane). Its host's first: the host moves down the heap
    /// (or leaves it), O(log hosts); elsewhere `SortedRun.remove`.
    mutating func remove(_ key: RunQueue.Key, host: String) {
        guard var run = hosts.removeValue(forKey: host) else { return }
        let slot = run.slot
        if heads[slot].key == key {
            guard let next = run.rest.popFirst() else {
                removeHead(at: slot)
                return
            }
            hosts[host] = run
            heads[slot].key = next
            siftDown(slot)
            return
        }
        run.rest.remove(key)
        hosts[host] = run
    }

    /// The first task in start order that `isHeld` lets start, never looking at the tasks of a host `hostHeld`
    /// holds (it must hold only hosts every task of which `isHeld` holds). The hosts are visited in the order of
    /// their first task (a walk of the heap by its smallest open node), and a host's later tasks only when its
    /// earlier ones are held one by one (a transfer still stopping). Nothing at or after `before` is looked at
    /// (another lane's answer: a later one here would not be taken). O((hosts held + tasks held + 1) × log).
    func first(before bound: RunQueue.Key? = nil, isHeld: (RunQueue.Key, String) -> Bool,
               hostHeld: (String) -> Bool) -> (key: RunQueue.Key, host: String)? {
        guard let root = heads.first, bound.map({ root.key < $0 }) ?? true else { return nil }
        let rootHeld = hostHeld(root.host)
        if !rootHeld, !isHeld(root.key, root.host) { return (root.key, root.host) }
        var open = Heap<Visit>()
        for child in 1..<min(3, heads.count) { open.insert(Visit(key: heads[child].key, slot: child, isHead: true)) }
        if !rootHeld { openNext(after: root.key, slot: 0, into: &open) }
        while let visit = open.popMin(), bound.map({ visit.key < $0 }) ?? true {
            let host = heads[visit.slot].host
            if visit.isHead { // a host's first task: open its children in the heap
                for child in Self.children(of: visit.slot, count: heads.count) {
                    open.insert(Visit(key: heads[child].key, slot: child, isHead: true))
                }
                if hostHeld(host) { continue }
            }
            if !isHeld(visit.key, host) { return (visit.key, host) }
            openNext(after: visit.key, slot: visit.slot, into: &open)
        }
        return nil
    }

    /// Opens the task after `key` of the host at `slot` (its first's key, or one of its `rest`), if it has one.
    private func openNext(after key: RunQueue.Key, slot: Int, into open: inout Heap<Visit>) {
        guard let next = hosts[heads[slot].host]?.rest.first(after: key) else { return }
        open.insert(Visit(key: next, slot: slot, isHead: false))
    }

    /// A task to look at in `first`: one of the host at `slot` of the heap (`isHead`: its first).
    private struct Visit: Comparable {
        var key: RunQueue.Key
        var slot: Int
        var isHead: Bool

        static func < (a: Visit, b: Visit) -> Bool { a.key < b.key }
        static func == (a: Visit, b: Visit) -> Bool { a.key == b.key }
    }

    // MARK: The heap of hosts

    private mutating func removeHead(at slot: Int) {
        let last = heads.count - 1
        if slot != last { swapAt(slot, last) }
        heads.removeLast()
        if slot < heads.count {
            siftDown(slot)
            siftUp(slot)
        }
    }

    private mutating func siftUp(_ start: Int) {
        var i = start
        while i > 0 {
            let parent = (i - 1) / 2
            guard heads[i].key < heads[parent].key else { return }
            swapAt(i, parent)
            i = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var i = start
        while true {
            var smallest = i
            for child in Self.children(of: i, count: heads.count) where heads[child].key < heads[smallest].key {
                smallest = child
            }
            guard smallest != i else { return }
            swapAt(i, smallest)
            i = smallest
        }
    }

    /// The children of `slot` in a heap of `count`.
    private static func children(of slot: Int, count: Int) -> Range<Int> {
        min(2 * slot + 1, count)..<min(2 * slot + 3, count)
    }

    private mutating func swapAt(_ a: Int, _ b: Int) {
        heads.swapAt(a, b)
        hosts[heads[a].host]?.slot = a
        hosts[heads[b].host]?.slot = b
    }
}
