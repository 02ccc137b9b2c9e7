import HalfTunesEngine
import HalfTunesProtocol

/// The daemon's tasks by id, with the number of unfinished tasks per session and per owner uid kept up to
/// date by every write, so the caps `task.create` checks cost the same with ten tasks or 100,000.
/// Every write goes through the subscript's setter (also `tasks[id]?.field = value`), which is where the
/// counts change: a task counts while its state is not terminal.
struct TaskTable: Sequence {
    private var storage: [Int64: ManagedTask] = [:]
    private var unfinishedBySession: [String: Int] = [:]
    private var unfinishedByOwner: [UInt32: Int] = [:]

    subscript(id: Int64) -> ManagedTask? {
        get { storage[id] }
        set {
            if let old = storage[id] { count(old, by: -1) }
            if let new = newValue { count(new, by: 1) }
            storage[id] = newValue
        }
    }

    var values: Dictionary<Int64, ManagedTask>.Values { storage.values }
    var keys: Dictionary<Int64, ManagedTask>.Keys { storage.keys }
    var count: Int { storage.count }
    var isEmpty: Bool { storage.isEmpty }
    func makeIterator() -> Dictionary<Int64, ManagedTask>.Iterator { storage.makeIterator() }

    /// Tasks of `session` that are not completed, failed or canceled.
    func unfinished(session: String) -> Int { unfinishedBySession[session] ?? 0 }
    /// Tasks of all the sessions of `owner` that are not completed, failed or canceled.
    func unfinished(owner: UInt32) -> Int { unfinishedByOwner[owner] ?? 0 }

    private mutating func count(_ task: ManagedTask, by delta: Int) {
        guard !task.machine.state.isTerminal else { return }
        Self.add(delta, to: &unfinishedBySession, task.record.session)
        Self.add(delta, to: &unfinishedByOwner, task.owner)
    }

    private static func add<Key: Hashable>(_ delta: Int, to counts: inout [Key: Int], _ key: Key) {
        let value = (counts[key] ?? 0) + delta
        precondition(value >= 0, "unfinished-task count below zero")
        counts[key] = value == 0 ? nil : value
    }
}
