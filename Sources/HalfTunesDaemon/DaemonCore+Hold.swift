import HalfTunesProtocol

extension DaemonCore {
    /// Why a queued task is not running yet; nil for any other state.
    func hold(_ t: ManagedTask) -> TaskHold? {
        guard t.machine.state == .queued else { return nil }
        if shuttingDown { return TaskHold(reason: "shuttingDown", message: "The daemon is shutting down") }
        if t.runtime != nil {
            return TaskHold(reason: "previousTransferStopping", message: "Its previous transfer is still stopping")
        }
        let ahead = queue.firstIndex(of: t.id) ?? 0
        let running = tasks.values.reduce(0) { $0 + ($1.machine.state == .running ? 1 : 0) }
        if running >= configuration.maxConcurrent {
            return TaskHold(reason: "maxConcurrent",
                            message: "\(running) of \(configuration.maxConcurrent) daemon-wide transfer slots in use"
                                + (ahead > 0 ? "; \(ahead) task\(ahead == 1 ? "" : "s") ahead in the queue" : ""))
        }
        return TaskHold(reason: "queue", message: "\(ahead) task\(ahead == 1 ? "" : "s") ahead in the queue")
    }
}
