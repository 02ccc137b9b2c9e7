// The rows of finished tasks `task.list` pages read, kept so a page listed again is not read and decoded again.
import GRDB
import HalfTunesCore
import HalfTunesProtocol
import Synchronization

/// Rows of finished tasks that `taskPage` read, by id, each with the text the daemon describes it by
/// (`FinishedRow`). A client that polls its list (an app's window, `halftunesctl list` in a loop) gets the same
/// finished tasks page after page: reading and decoding their rows was most of a `task.list`'s cost,
/// then describing them again.
///
/// Never stale: every change of a `tasks` row made through the journal's connection (an update or a deletion),
/// whatever statement made it, forgets that row before its transaction commits (`RowChanges`, a GRDB transaction
/// observer on SQLite's update hook: a change rolled back afterwards has forgotten a row that is as it was, which
/// is only read again); a deleted session (whose rows may go by a foreign
/// key cascade) forgets every row. Rows are kept from inside the read that returned them, on the journal's one
/// serial connection, so no change can come between the read and the keeping. A transaction rolled back after a
/// change forgot its row anyway: it is read again. Only the journal's own connection is watched: a journal
/// changed by another process while the daemon runs (by hand, in a test) is not seen, as the daemon's memory does
/// not see it either.
///
/// At most `capacity` rows; full, it starts again empty (a list of more finished tasks than that reads them again).
final class FinishedRowCache: Sendable {
    static let capacity = 4_096
    private let kept = Mutex<[Int64: FinishedRow]>([:])

    /// The kept rows among `ids`.
    func rows(_ ids: some Sequence<Int64>) -> [Int64: FinishedRow] {
        kept.withLock { rows in
            var found: [Int64: FinishedRow] = [:]
            for id in ids { if let row = rows[id] { found[id] = row } }
            return found
        }
    }

    /// Keeps rows just read, or just described (call it inside the read, on the journal's connection).
    func keep(_ finished: [FinishedRow]) {
        guard !finished.isEmpty else { return }
        kept.withLock { rows in
            if rows.count + finished.count > Self.capacity { rows.removeAll(keepingCapacity: true) }
            for row in finished { if let id = row.record.id { rows[id] = row } }
        }
    }

    func forget(_ id: Int64) {
        kept.withLock { rows in _ = rows.removeValue(forKey: id) }
    }

    func forgetAll() {
        kept.withLock { rows in rows.removeAll() }
    }

    var count: Int { kept.withLock { $0.count } }

    /// Watches the journal's connection: a changed `tasks` row is forgotten (the table's row id is the task's
    /// id), a deleted session forgets every row (its tasks went with it by the cascade).
    final class RowChanges: TransactionObserver {
        let cache: FinishedRowCache
        init(_ cache: FinishedRowCache) { self.cache = cache }

        /// Not inserts: a new row has an id never used before (AUTOINCREMENT), so nothing kept under it, and a
        /// `task.create` pays nothing for the watch (the journal replaces no row by `INSERT OR REPLACE`).
        func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool {
            switch eventKind {
            case .insert: false
            case .update(let table, _): table == "tasks"
            case .delete(let table): table == "tasks" || table == "sessions"
            }
        }

        func databaseDidChange(with event: DatabaseEvent) {
            if event.kind == .delete, event.tableName == "sessions" {
                cache.forgetAll()
            } else {
                cache.forget(event.rowID)
            }
        }

        func databaseDidCommit(_ db: Database) {}
        func databaseDidRollback(_ db: Database) {}
    }
}

/// A finished task's row as a `task.list` page gives it: the row, and the text the daemon describes it by when the
/// page was read with a `describe` (made once, kept with the row: a finished task does not change, and any change
/// of its row forgets both). A class: a page copies a reference, not the row's fields.
public final class FinishedRow: Sendable, Equatable {
    public let record: TaskRecord
    public let text: TaskInfoText?

    public init(record: TaskRecord, text: TaskInfoText? = nil) {
        self.record = record
        self.text = text
    }

    public static func == (a: FinishedRow, b: FinishedRow) -> Bool {
        a === b || (a.record == b.record && a.text == b.text)
    }
}
