// The unfinished tasks' ids in order by state: `task.list --state` pages from memory, not from journal indexes.
import HalfTunesProtocol

/// The ids of the unfinished tasks (suspended, queued, running, waiting) in ascending order, per state for every
/// session, per session and per owner: a page of `task.list` with one of these states costs its `limit` and a
/// binary search, whatever the tasks. The journal indexes states of finished tasks only (schema v18), so that a
/// pause, a resume or a retry writes no index entry there. `TaskTable` keeps it in step. A pure value: no I/O.
struct StateIDIndex: Sendable {
    /// Whose tasks a page lists: everyone's (root), one session's, or every session of one uid.
    enum Scope: Sendable, Equatable {
        case all
        case session(String)
        case owner(UInt32)
    }

    private var all: [TaskState: SortedRun<Int64>] = [:]
    private var bySession: [String: [TaskState: SortedRun<Int64>]] = [:]
    private var byOwner: [UInt32: [TaskState: SortedRun<Int64>]] = [:]

    mutating func insert(_ id: Int64, state: TaskState, session: String, owner: UInt32) {
        // In place: a run taken out and written back would copy its chunks.
        all[state, default: SortedRun()].insert(id)
        bySession[session, default: [:]][state, default: SortedRun()].insert(id)
        byOwner[owner, default: [:]][state, default: SortedRun()].insert(id)
    }

    mutating func remove(_ id: Int64, state: TaskState, session: String, owner: UInt32) {
        Self.remove(id, from: &all, state)
        Self.remove(id, from: &bySession[session, default: [:]], state)
        if bySession[session]?.isEmpty == true { bySession[session] = nil }
        Self.remove(id, from: &byOwner[owner, default: [:]], state)
        if byOwner[owner]?.isEmpty == true { byOwner[owner] = nil }
    }

    /// Up to `limit` ids above `after` in `state`, ascending, of `scope`.
    func ids(in state: TaskState, of scope: Scope, after: Int64, limit: Int) -> [Int64] {
        let run: SortedRun<Int64>?
        switch scope {
        case .all: run = all[state]
        case .session(let s): run = bySession[s]?[state]
        case .owner(let uid): run = byOwner[uid]?[state]
        }
        guard let run, limit > 0, after < Int64.max else { return [] }
        return Array(run.items(from: after + 1).prefix(limit))
    }

    /// An id not held is left alone: `TaskTable` removes only what it inserted, and a slip here must not take
    /// the daemon down (a page would then show a task in its old state until it changes again).
    private static func remove(_ id: Int64, from runs: inout [TaskState: SortedRun<Int64>], _ state: TaskState) {
        runs[state]?.remove(id)
        if runs[state]?.isEmpty == true { runs[state] = nil }
    }
}
