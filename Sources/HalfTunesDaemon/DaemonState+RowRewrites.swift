// Task rows whose journal write failed, written again: the state decides what and when, the runner only reports the failure.
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonState {
    /// A finished task's row with its events, as the failed write carried them: nothing later writes the row of a
    /// finished task, and its events (its `didComplete`) reach subscribers only once it is written.
    struct FinishedRow: Equatable, Sendable {
        var record: TaskRecord
        var payloads: [EventPayload]
    }

    /// A row to write again: `due` is when it is written again, or (`written`) when it counts as written if no
    /// failure of it came back by then.
    struct RowRewrite: Equatable, Sendable {
        var session: String
        var finished: FinishedRow?
        var attempts: Int
        var due: Double
        var written = false
    }

    /// The first wait before a failed row is written again; it doubles with each failure, up to `rowRewriteMaxDelay`.
    static let rowRewriteFirstDelay: Double = 1
    static let rowRewriteMaxDelay: Double = 60

    static func rowRewriteDelay(attempts: Int) -> Double {
        min(rowRewriteMaxDelay, rowRewriteFirstDelay * Double(1 << min(max(attempts - 1, 0), 16)))
    }

    /// `rowWriteFailed`: the row is written again after a wait that grows with the failures of this task's row in a
    /// row (a journal on a full disk is not hammered). A finished row keeps the events it carries (after those of
    /// an earlier failed row of the task, when it brings others), and its task comes back into memory until then
    /// (it had left it for the journal, which does not have it finished): it is described, listed and counted as
    /// finished meanwhile. Not for a task of another session of that name (opened since), nor one the state does
    /// not have and no finished row brings (its insert failed, or it is gone).
    mutating func rowWriteFailed(_ id: Int64, session: String, finished: FinishedRow?, now: Double) {
        guard let s = sessions[session] else { return }
        if let finished {
            guard finished.record.createdAt >= s.record.createdAt else { return } // of an earlier session of the name
        } else if tasks[id] == nil, rowRewrites[id] == nil {
            return
        }
        var kept = finished ?? rowRewrites[id]?.finished
        if let earlier = rowRewrites[id]?.finished, var newer = finished, newer.payloads != earlier.payloads {
            newer.payloads = earlier.payloads + newer.payloads // both failed: the first one's events come first
            kept = newer
        }
        if let kept, tasks[id] == nil {
            let state = kept.record.state
            if tasks.finishedCounts(session: session)[state, default: 0] > 0 { // as `evict` counted it
                tasks.countFinished(session: session, state: state, by: -1)
            }
            tasks[id] = ManagedTask(row: kept.record, owner: s.record.uid)
        }
        let attempts = (rowRewrites[id]?.attempts ?? 0) + 1
        rowRewrites[id] = RowRewrite(session: session, finished: kept, attempts: attempts,
                                     due: now + Self.rowRewriteDelay(attempts: attempts))
    }

    /// From `clockTick` (and, all of them, when shutdown's grace ends): the rows due are written again (`journal`),
    /// the task's row as the state has it now (the write is a whole row, so a row written meanwhile loses nothing),
    /// with a finished row's events. A rewrite whose failure did not come back within its wait counts as written:
    /// a finished task then leaves memory again. O(rows to write again), only while there are some.
    mutating func rowRewritesDue(now: Double, all: Bool = false, into actions: inout [Action]) {
        guard !rowRewrites.isEmpty else { return }
        for (id, rewrite) in rowRewrites.sorted(by: { $0.key < $1.key }) where all || rewrite.due <= now {
            if rewrite.written && !all {
                rowRewrites[id] = nil
                evict(id) // a finished one lives in the journal only again
                continue
            }
            guard let record = tasks[id]?.record ?? rewrite.finished?.record else {
                rowRewrites[id] = nil // gone
                continue
            }
            actions.append(.journal(record, rewrite.finished?.payloads ?? []))
            rowRewrites[id]?.written = true
            rowRewrites[id]?.due = now + Self.rowRewriteDelay(attempts: rewrite.attempts)
        }
    }

    /// The session left the state: its rows are not written again (its tasks' rows went with it).
    mutating func forgetRowRewrites(session: String) {
        guard !rowRewrites.isEmpty else { return }
        rowRewrites = rowRewrites.filter { $0.value.session != session }
    }
}
