// Describing many tasks at once: the queue's shared order worked out once for all of them.
import HalfTunesProtocol

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
