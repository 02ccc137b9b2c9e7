// Which finished tasks a retention sweep may delete: a decision of the state, carried out by the runner.
import HalfTunesProtocol

/// One session's part of a sweep: its finished tasks that finished at or before `before` (its
/// `finishedTaskRetention` ago) may go once their events are acknowledged, except `keeping` (tasks still in
/// memory: a transfer still stopping, a publish).
struct RetentionSweep: Equatable {
    let session: String
    let before: Double
    let keeping: Set<Int64>
}

extension DaemonState {
    /// The sweeps due at `now`: every session with finished tasks in the journal (or only `session`), each with
    /// its own cutoff. Reads the sessions that have finished tasks, never the tasks.
    func retentionSweeps(now: Double, only session: String? = nil) -> [RetentionSweep] {
        let candidates = session.map { [$0] } ?? Array(tasks.sessionsWithFinishedTasks)
        return candidates.compactMap { identifier in
            guard let s = sessions[identifier], !tasks.finishedCounts(session: identifier).isEmpty else { return nil }
            let keep = s.record.configuration.finishedTaskRetention ?? SessionConfiguration.defaultFinishedTaskRetention
            return RetentionSweep(session: identifier, before: now - keep, keeping: tasks.ids(session: identifier))
        }
    }
}
