// Why a queued task is not running yet (TaskInfo.hold), from the same limit checks that start tasks.
import HalfTunesProtocol

extension DaemonCore {
    /// Why a queued task is not running yet; nil for any other state.
    func hold(_ t: ManagedTask) -> TaskHold? {
        guard t.machine.state == .queued else { return nil }
        if shuttingDown { return TaskHold(reason: "shuttingDown", message: "The daemon is shutting down") }
        if let memo = holdsMemo, let hold = memo[t.id] { return hold }
        guard let (_, decision) = plan(until: t.id).last(where: { $0.0 == t.id }) else {
            return TaskHold(reason: "queue", message: "It is about to take its place in the queue")
        }
        switch decision {
        case .hold(let hold):
            return hold
        case .start:
            // Between two scheduler passes: a slot is free and it starts at the next one.
            let ahead = queue.firstIndex(of: t.id) ?? 0
            return TaskHold(reason: "queue", message: ahead == 0
                ? "It is next and starts as soon as the scheduler runs"
                : "\(ahead) task\(ahead == 1 ? "" : "s") ahead in the queue")
        }
    }
}

extension DaemonCore {
    /// Describes many tasks, planning the queue once for all of them (not once per queued task).
    func infos(_ list: [ManagedTask]) -> [TaskInfo] {
        if list.contains(where: { $0.machine.state == .queued }) {
            var holds: [Int64: TaskHold] = [:]
            for (id, decision) in plan() {
                if case .hold(let hold) = decision { holds[id] = hold }
            }
            holdsMemo = holds
        }
        defer { holdsMemo = nil }
        return list.map(info)
    }
}
