// Housekeeping the state asks for: finished tasks leave the journal (retention), old resume data expires.
import HalfTunesJournal

extension DaemonCore {
    /// Rows deleted per transaction, and transactions per sweep: a sweep holds the actor for a bounded time;
    /// what is left goes on at the next tick.
    static let retentionBatch = 2_000
    static let retentionBatchesPerSweep = 5
    /// Events acknowledged at once past which the WAL is truncated right after (`Journal.truncateWAL`).
    static let largeAcknowledgement = 10_000

    /// `sweepRetention`: deletes the finished tasks the sweeps allow (acknowledged, their session's
    /// `finishedTaskRetention` passed, not in memory), with their data-task bodies, in batches within a budget
    /// (what is left goes on at the next tick: `retentionSwept(backlog: true)`), and gives the freed pages back to
    /// the file system. The cost follows the sessions with finished tasks and the rows deleted, not how many tasks
    /// there are.
    func sweepRetention(_ sweeps: [RetentionSweep]) {
        var budget = Self.retentionBatchesPerSweep
        var deletedAny = false
        var unfinishedWork = false
        for sweep in sweeps {
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
        if deletedAny { try? journal.releaseFreePages() }
        feedAndRun(.retentionSwept(backlog: unfinishedWork))
    }

    /// `pruneResumeData`: resume data older than `resumeDataLifetime` goes, with its partial file.
    func pruneResumeData(now: Double) {
        let cutoff = now - configuration.resumeDataLifetime
        for token in (try? journal.resumeTokens(createdBefore: cutoff)) ?? [] {
            discardPartial(token.partialPath)
            guard (try? journal.deleteResumeToken(token.token)) != nil,
                  let uid = state.sessions[token.session]?.record.uid else { continue }
            feedAndRun(.resumeDataChanged(uid: uid, kept: -1, inFlight: 0))
        }
    }
}
