// Housekeeping as the state decides it: when finished tasks are swept and which may go, when resume data expires.
import HalfTunesJournal
import HalfTunesProtocol

/// One session's part of a sweep: its finished tasks that finished at or before `before` (its
/// `finishedTaskRetention` ago) may go once their events are acknowledged, except `keeping` (finished tasks still
/// in memory: a transfer still stopping, a publish, resume data being made).
struct RetentionSweep: Equatable {
    let session: String
    let before: Double
    let keeping: Set<Int64>
}

/// One sweep's batches, decided as a value (the runner deletes each batch it names and reports what went):
/// sessions in turn, a session done once a batch comes back short of the limit (less what it keeps), empty, or
/// failed; at most `batchesPerSweep` batches, so a sweep holds the journal for a bounded time, and work left
/// past them is the next tick's (`backlog`).
struct RetentionSweepPlan: Equatable {
    /// Rows deleted per transaction, and transactions per sweep.
    static let batch = 2_000
    static let batchesPerSweep = 5

    private let sweeps: [RetentionSweep]
    private var index = 0
    private var budget = batchesPerSweep
    /// Some batch deleted rows (the runner gives the freed pages back once the sweep is over).
    private(set) var deletedAny = false
    /// The budget ran out with sessions or rows left to sweep.
    private(set) var backlog = false

    init(_ sweeps: [RetentionSweep]) { self.sweeps = sweeps }

    /// The session whose next batch to delete (nil: the sweep is over).
    mutating func next() -> RetentionSweep? {
        guard index < sweeps.count else { return nil }
        guard budget > 0 else {
            backlog = true
            return nil
        }
        budget -= 1
        return sweeps[index]
    }

    /// The batch `next` named deleted `count` rows (nil: its write failed).
    mutating func deleted(_ count: Int?) {
        guard let count, count > 0 else { return index += 1 } // nothing (left) to delete, or the journal failed
        deletedAny = true
        if count < Self.batch - sweeps[index].keeping.count { index += 1 } // a short batch was the last one
    }
}

extension DaemonState {
    /// Seconds between two sweeps (sooner while one left work behind, and right after an acknowledgement in a
    /// session that keeps nothing).
    static let retentionSweepInterval: Double = 60
    /// Seconds between two expiries of old resume data (and one when recovery ends).
    static let resumeDataPruneInterval: Double = 3600
    /// Seconds after a failed expiry of old resume data before it is tried again.
    static let resumeDataPruneRetry: Double = 60
    /// Events acknowledged at once past which the journal gives its free pages back (`releaseFreePages`).
    static let largeAcknowledgement = 10_000

    /// From `clockTick`: a sweep of every session with finished tasks every `retentionSweepInterval`, or at once
    /// while the last one left work (`retentionSwept(backlog: true)`); resume data expires hourly.
    mutating func housekeepingDue(now: Double, into actions: inout [Action]) {
        if retentionBacklog || now - lastRetentionSweep >= Self.retentionSweepInterval {
            lastRetentionSweep = now
            retentionBacklog = false
            let sweeps = retentionSweeps(now: now)
            if !sweeps.isEmpty { actions.append(.sweepRetention(sweeps)) }
        }
        if now - lastResumeDataPrune >= Self.resumeDataPruneInterval {
            lastResumeDataPrune = now
            actions.append(.pruneResumeData(createdBefore: now - caps.resumeDataLifetime))
        }
    }

    /// A failed expiry of old resume data is tried again in `resumeDataPruneRetry` seconds (by `housekeepingDue`),
    /// not in an hour: the next expiry counts from a minute's time. Not at once: the journal that failed (a full
    /// disk, an I/O error) would most likely fail again at every tick.
    mutating func resumeDataExpiryFailed(now: Double) {
        lastResumeDataPrune = min(lastResumeDataPrune, now - Self.resumeDataPruneInterval + Self.resumeDataPruneRetry)
    }

    /// The sweeps due at `now`: every session with finished tasks in the journal (or only `session`), each with
    /// its own cutoff, keeping the finished tasks still in memory, those whose resume data is being made among them
    /// (they stay until it is made; a task in memory that is not finished has no finished row: the sweep would not
    /// touch it). Reads the sessions
    /// that have finished tasks, never the tasks, and copies no set of the session's ids (the sweep holds
    /// `keeping` across its awaits: a copy shared with the table would make the next change to it copy it).
    func retentionSweeps(now: Double, only session: String? = nil) -> [RetentionSweep] {
        // In a fixed order (a replay of the inputs gives the same actions, whatever the hashing)
        let candidates = session.map { [$0] } ?? tasks.sessionsWithFinishedTasks.sorted()
        return candidates.compactMap { identifier in
            guard let s = sessions[identifier], !tasks.finishedCounts(session: identifier).isEmpty else { return nil }
            let keep = s.record.configuration.finishedTaskRetention ?? SessionConfiguration.defaultFinishedTaskRetention
            return RetentionSweep(session: identifier, before: now - keep, keeping: tasks.finishedInMemory(session: identifier))
        }
    }

    /// Adds `delta` to `uid`'s count (never below 0; a count of 0 is not stored).
    static func add(_ delta: Int, to counts: inout [UInt32: Int], _ uid: UInt32) {
        guard delta != 0 else { return }
        let total = max(0, (counts[uid] ?? 0) + delta)
        counts[uid] = total == 0 ? nil : total
    }
}
