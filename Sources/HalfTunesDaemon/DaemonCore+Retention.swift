// Finished tasks leave the journal once their events are acknowledged and their session's retention has passed.
import HalfTunesJournal

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
        for sweep in state.retentionSweeps(now: now, only: only) {
            guard budget > 0 else { unfinishedWork = true; break }
            while budget > 0 {
                budget -= 1
                guard let deleted = try? journal.deleteFinishedTasks(session: sweep.session, finishedBefore: sweep.before,
                                                                      limit: Self.retentionBatch, keeping: sweep.keeping)
                else { break }
                let count = deleted.values.reduce(0, +)
                guard count > 0 else { break }
                deletedAny = true
                feedAndRun(.finishedTasksDeleted(sweep.session, deleted))
                logger.debug("finished tasks deleted", metadata: ["session": "\(sweep.session)", "tasks": "\(count)"])
                // A batch short of the limit (less what is kept) was the last one.
                guard count >= Self.retentionBatch - sweep.keeping.count else { break }
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
