// Task rows whose journal write failed, written again: the state decides what and when, the runner only reports the failure.
import HalfTunesCore
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonState {
    /// A finished task's row with its events, as the failed write carried them: nothing later writes the row of a
    /// finished task, and its events (its `didComplete`) reach subscribers only once it is written.
    struct FinishedRow: Equatable, Sendable {
        var record: TaskRecord
        var payloads: [EventPayload]
    }

    /// When a write the journal refused is written again (a task's row, a session's launch record): `due` is when,
    /// or (`written`) when it counts as written if no failure of it came back by then. The wait is 1 s, doubling
    /// with each failure of the same write in a row up to 60 s, so a journal on a full disk is not hammered.
    struct RewriteSchedule: Equatable, Sendable {
        var attempts: Int
        var due: Double
        var written = false

        static let firstDelay: Double = 1
        static let maxDelay: Double = 60

        static func delay(attempts: Int) -> Double {
            min(maxDelay, firstDelay * Double(1 << min(max(attempts - 1, 0), 16)))
        }

        /// A failure came back (after `earlier`'s, if the write had failed before): written again after the wait.
        init(failedAfter earlier: RewriteSchedule?, now: Double) {
            attempts = (earlier?.attempts ?? 0) + 1
            due = now + Self.delay(attempts: attempts)
        }

        /// Written again now: it counts as written unless its failure comes back within the wait.
        mutating func rewritten(now: Double) {
            written = true
            due = now + Self.delay(attempts: attempts)
        }

        /// The keys of the schedules due at `now` (all of them when `all`), in order, with their schedules.
        static func due<Key: Comparable>(_ schedules: [Key: RewriteSchedule], now: Double,
                                         all: Bool) -> [(key: Key, value: RewriteSchedule)] {
            schedules.filter { all || $0.value.due <= now }.sorted { $0.key < $1.key }
        }
    }

    /// A task's row to write again, with a finished row's events.
    struct RowRewrite: Equatable, Sendable {
        var session: String
        var finished: FinishedRow?
        var schedule: RewriteSchedule
    }

    /// A task's row or checkpoint the journal did not take (`rowWriteFailed`), as the runner saw it.
    struct RowWriteFailure: Equatable, Sendable {
        var id: Int64
        var session: String
        /// The row as the write carried it, and its events' payloads (none for a checkpoint: the state has the
        /// ranges it carried).
        var row: TaskRecord?
        var payloads: [EventPayload] = []
        /// How many of its journaled events were sent numbered and counted (`eventsJournaled`): their seqs were
        /// withdrawn, so they no longer wait for an acknowledgement.
        var lostEvents = 0
        /// Not even submitted (the journal refused it at once): none of its events was sent.
        var unsent = false
        /// The journal said it has no such row (its insert failed).
        var rowMissing = false
        /// The journal still takes writes: not closed, and no failed fsync (after which nothing becomes durable).
        var journalTakesWrites = true
    }

    /// `rowWriteFailed`: the failure's lost events no longer wait for an acknowledgement. A row the journal would not
    /// even take has its events sent live now (`deliver`), except the journaled ones of a finished row kept to be
    /// written again. Then, while the journal takes writes, the row is written again after a wait. A journal that
    /// takes no more writes gets no rewrite (it could never succeed, and one tried every minute would keep the
    /// daemon from ever being idle), but a finished task still comes back into memory: until the daemon stops, it
    /// is described as finished, not as the older row the journal has.
    mutating func rowWriteFailed(_ failure: RowWriteFailure, now: Double, into actions: inout [Action]) {
        eventsLost(failure.session, count: failure.lostEvents)
        var finished: FinishedRow?
        if let row = failure.row, row.state.isTerminal, !failure.rowMissing {
            finished = FinishedRow(record: row, payloads: failure.payloads) // nothing later would carry its events
        }
        guard failure.journalTakesWrites else {
            if let finished { _ = bringBack(failure.id, finished.record, session: failure.session) }
            for payload in failure.unsent ? failure.payloads : [] {
                actions.append(.deliver(session: failure.session, task: failure.id, payload))
            }
            return
        }
        let kept = rewrite(failure.id, session: failure.session, finished: finished, now: now)
        if failure.unsent {
            for payload in failure.payloads where !(kept && finished != nil && payload.isJournaled) {
                actions.append(.deliver(session: failure.session, task: failure.id, payload))
            }
        }
    }

    /// The row is written again after a wait that grows with the failures of this task's row in a
    /// row (a journal on a full disk is not hammered). A finished row keeps the events it carries (after those of
    /// an earlier failed row of the task, when it brings others), and its task comes back into memory until then
    /// (it had left it for the journal, which does not have it finished): it is described, listed and counted as
    /// finished meanwhile. Not for a task of another session of that name (opened since), nor one the state does
    /// not have and no finished row brings (its insert failed, or it is gone). Whether it is written again.
    private mutating func rewrite(_ id: Int64, session: String, finished: FinishedRow?, now: Double) -> Bool {
        guard sessions[session] != nil else { return false }
        if let finished {
            guard bringBack(id, finished.record, session: session) else { return false }
        } else if tasks[id] == nil, rowRewrites[id] == nil {
            return false
        }
        var kept = finished ?? rowRewrites[id]?.finished
        if let earlier = rowRewrites[id]?.finished, var newer = finished, newer.payloads != earlier.payloads {
            newer.payloads = earlier.payloads + newer.payloads // both failed: the first one's events come first
            kept = newer
        }
        rowRewrites[id] = RowRewrite(session: session, finished: kept,
                                     schedule: RewriteSchedule(failedAfter: rowRewrites[id]?.schedule, now: now))
        return true
    }

    /// A finished task whose row the journal does not have finished comes back into memory (it had left it for the
    /// journal), counted once, unless it is there already; not one of an earlier session of that name (the task is
    /// older than the session). Whether it is (or was) there.
    private mutating func bringBack(_ id: Int64, _ row: TaskRecord, session: String) -> Bool {
        guard let s = sessions[session], row.createdAt >= s.record.createdAt else { return false }
        guard tasks[id] == nil else { return true }
        if tasks.finishedCounts(session: session)[row.state, default: 0] > 0 { // as `evict` counted it
            tasks.countFinished(session: session, state: row.state, by: -1)
        }
        tasks[id] = ManagedTask(row: row, owner: s.record.uid)
        return true
    }

    /// From `clockTick` (and, all of them, when shutdown's grace ends): the rows due are written again (`journal`),
    /// the task's row as the state has it now (the write is a whole row, so a row written meanwhile loses nothing),
    /// with a finished row's events. A rewrite whose failure did not come back within its wait counts as written:
    /// a finished task then leaves memory again. O(rows to write again), only while there are some.
    mutating func rowRewritesDue(now: Double, all: Bool = false, into actions: inout [Action]) {
        guard !rowRewrites.isEmpty else { return }
        for (id, rewrite) in RewriteSchedule.due(rowRewrites.mapValues(\.schedule), now: now, all: all) {
            if rewrite.written && !all {
                rowRewrites[id] = nil
                evict(id) // a finished one lives in the journal only again
                continue
            }
            let finished = rowRewrites[id]?.finished
            guard var record = tasks[id]?.record ?? finished?.record else {
                rowRewrites[id] = nil // gone
                continue
            }
            record.unwritten.bits = .all // what the failed write held is not known to be in the row
            actions.append(.journal(record, finished?.payloads ?? []))
            rowRewrites[id]?.schedule.rewritten(now: now)
        }
    }

    /// The session left the state: its rows are not written again (its tasks' rows went with it).
    mutating func forgetRowRewrites(session: String) {
        guard !rowRewrites.isEmpty else { return }
        rowRewrites = rowRewrites.filter { $0.value.session != session }
    }
}
