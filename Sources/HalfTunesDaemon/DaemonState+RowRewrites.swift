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
    /// row (a journal on a full disk is not hammered). A finished row keeps the events it carries, and its task
    /// comes back into memory until then (it had left it for the journal, which does not have it finished): it is
    /// described, listed and counted as finished meanwhile.
    mutating func rowWriteFailed(_ id: Int64, finished: FinishedRow?, now: Double) {
        if let finished, tasks[id] == nil, let s = sessions[finished.record.session] {
            let session = s.record.identifier, state = finished.record.state
            if tasks.finishedCounts(session: session)[state, default: 0] > 0 { // as `evict` counted it
                tasks.countFinished(session: session, state: state, by: -1)
            }
            tasks[id] = ManagedTask(row: finished.record, owner: s.record.uid)
        }
        let attempts = (rowRewrites[id]?.attempts ?? 0) + 1
        rowRewrites[id] = RowRewrite(finished: finished ?? rowRewrites[id]?.finished, attempts: attempts,
                                     due: now + Self.rowRewriteDelay(attempts: attempts))
    }

    /// From `clockTick`: the rows due are written again (`journal`): a finished task's with its events, another's
    /// as the state has it now (the write is a whole row, so a row written meanwhile loses nothing). A rewrite whose
    /// failure did not come back within its wait counts as written. O(rows to write again), only while there are
    /// some.
    mutating func rowRewritesDue(now: Double, into actions: inout [Action]) {
        guard !rowRewrites.isEmpty else { return }
        for (id, rewrite) in rowRewrites.sorted(by: { $0.key < $1.key }) where rewrite.due <= now {
            if rewrite.written {
                rowRewrites[id] = nil
                continue
            }
            if let finished = rewrite.finished, sessions[finished.record.session] != nil {
                actions.append(.journal(finished.record, finished.payloads))
                evict(id) // the journal has it again (a failure brings it back)
            } else if let t = tasks[id] {
                actions.append(.journal(t.record, []))
            } else {
                rowRewrites[id] = nil // gone with its session, or deleted
                continue
            }
            rowRewrites[id]?.written = true
            rowRewrites[id]?.due = now + Self.rowRewriteDelay(attempts: rewrite.attempts)
        }
    }
}
