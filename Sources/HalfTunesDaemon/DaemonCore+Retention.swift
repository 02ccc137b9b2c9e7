// Finished tasks leave the journal once their events are acknowledged and their session's retention has passed.
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    /// Seconds between two sweeps (sooner while one left work behind, and right after an acknowledgement in a
    /// session that keeps nothing).
    static let retentionSweepInterval: Double = 60
    /// Rows deleted per transaction, and transactions per sweep: a sweep holds the actor for a bounded time;
    /// what is left goes on at the next tick.
    static let retentionBatch = 2_000
    static let retentionBatchesPerSweep = 5
    /// Events acknowledged at once past which the WAL is truncated right after (`Journal.truncateWAL`).
    static let largeAcknowledgement = 10_000

    /// Deletes the finished tasks of `only` (else of every session that has some) whose events are all
    /// acknowledged and whose session's `finishedTaskRetention` has passed since they finished, with their
    /// data-task bodies, and gives the freed pages back to the file system. The cost follows the sessions with
    /// finished tasks and the rows deleted, not how many tasks there are.
    func sweepFinishedTasks(only: String? = nil) {
        let now = clock()
        if only == nil { lastRetentionSweep = now }
        var budget = Self.retentionBatchesPerSweep
        var deletedAny = false
        var unfinishedWork = false
        let sessions = only.map { [$0] } ?? Array(state.tasks.sessionsWithFinishedTasks)
        for identifier in sessions {
            guard budget > 0 else { unfinishedWork = true; break }
            guard let s = state.sessions[identifier], !state.tasks.finishedCounts(session: identifier).isEmpty else { continue }
            let keep = s.record.configuration.finishedTaskRetention ?? SessionConfiguration.defaultFinishedTaskRetention
            while budget > 0 {
                budget -= 1
                // A finished task still in memory (its transfer still stopping) is left for a later sweep.
                guard let deleted = try? journal.deleteFinishedTasks(session: identifier, finishedBefore: now - keep,
                                                                      limit: Self.retentionBatch,
                                                                      keeping: state.tasks.ids(session: identifier))
                else { break }
                let count = deleted.values.reduce(0, +)
                if count > 0 {
                    deletedAny = true
                    _ = try? feed(.finishedTasksDeleted(identifier, deleted))
                    logger.debug("finished tasks deleted", metadata: ["session": "\(identifier)", "tasks": "\(count)"])
                }
                guard count > 0, count >= Self.retentionBatch - state.tasks.ids(session: identifier).count else { break }
                if budget == 0 { unfinishedWork = true }
            }
        }
        retentionBacklog = unfinishedWork
        if deletedAny { try? journal.releaseFreePages() }
    }

    /// From the clock tick: a sweep is due every `retentionSweepInterval`, or at once while one left work.
    func sweepFinishedTasksIfDue() {
        if retentionBacklog || clock() - lastRetentionSweep >= Self.retentionSweepInterval { sweepFinishedTasks() }
    }
}
