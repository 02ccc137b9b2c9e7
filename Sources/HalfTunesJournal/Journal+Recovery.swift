import Foundation
import GRDB
import HalfTunesCore
import HalfTunesProtocol

/// What a restart reads of the tasks table, in one pass: the tasks the daemon keeps in memory (unfinished, or
/// with a publish a crash interrupted), and how many finished tasks each session has per state (those stay in
/// the journal only).
extension Journal {
    /// Reads the tasks table on a thread of its own and hands the tasks the daemon keeps over in batches as they
    /// are read (in id order), so that the caller rebuilds its state from one batch while the next is read.
    /// Until `next()` has returned nil or thrown, the scan holds the journal: any other call waits for it.
    public func scanTasks(batchSize: Int = 1024) -> TaskScan {
        let scan = TaskScan()
        let thread = Thread { [self] in
            do {
                let finished = try read { db in try Self.scanTasks(db, batchSize: batchSize, deliver: scan.put) }
                scan.end(finished: finished, failure: nil)
            } catch {
                scan.end(finished: [:], failure: error)
            }
        }
        thread.name = "halftunesd journal scan"
        thread.start()
        return scan
    }

    /// The tasks the daemon keeps in memory, ordered by id (the scan, all at once). For tests (the daemon reads
    /// them in batches: `scanTasks`).
    func loadUnfinishedTasks() throws -> [TaskRecord] {
        try read { db in
            var tasks: [TaskRecord] = []
            _ = try Self.scanTasks(db, batchSize: 1024) { tasks.append(contentsOf: $0) }
            return tasks
        }
    }

    /// The rows a restart loads: unfinished, or being published (finished rows stay in the journal only); v17's
    /// triggers keep `loaded` so.
    static let loadedRows = "loaded = 1"

    /// One pass over the rows a restart loads (through the `tasks_loaded` index, so finished rows cost nothing):
    /// each read whole and delivered in batches of `batchSize`; and the finished tasks per session and state,
    /// from the `finished_counts` table the triggers keep. A row not stored as usual is read the general way,
    /// which explains what is wrong with it.
    static func scanTasks(_ db: Database, batchSize: Int,
                          deliver: ([TaskRecord]) -> Void) throws -> [String: [TaskState: Int]] {
        var batch: [TaskRecord] = []
        batch.reserveCapacity(batchSize)
        var positions: [String: Int]?
        let statement = try db.makeStatement(sql: "SELECT * FROM tasks WHERE \(loadedRows) ORDER BY id")
        let fast = TaskRowReader(statement)
        let rows = try Row.fetchCursor(statement)
        while let row = try rows.next() {
            let record: TaskRecord
            if let read = fast?.record() {
                record = read
            } else {
                let p = positions ?? RowReader.positions(of: row)
                positions = p
                record = try TaskRecord(row: row, positions: p)
            }
            batch.append(record)
            if batch.count == batchSize {
                deliver(batch)
                batch = []
                batch.reserveCapacity(batchSize)
            }
        }
        if !batch.isEmpty { deliver(batch) }
        return try finishedCounts(db)
    }

    /// The finished tasks per session and state (`finished_counts`).
    static func finishedCounts(_ db: Database) throws -> [String: [TaskState: Int]] {
        var finished: [String: [TaskState: Int]] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT session, state, count FROM finished_counts WHERE count > 0") {
            guard let state = TaskState(rawValue: row["state"]) else { continue }
            finished[row["session"], default: [:]][state] = row["count"]
        }
        return finished
    }
}

/// The batches of a `Journal.scanTasks` as its thread reads them. `next()` is awaited: the reader (the daemon's
/// actor, at start) never blocks a thread while the scan's thread reads.
public final class TaskScan: @unchecked Sendable {
    // Sound as @unchecked: every stored property is read and written only with `lock` held.
    private let lock = NSLock()
    private var batches: [[TaskRecord]] = []
    private var ended = false
    private var failure: (any Error)?
    private var finished: [String: [TaskState: Int]] = [:]
    /// The reader awaiting the next batch (one at a time: `next()` is not called again before it returns).
    private var waiting: CheckedContinuation<Void, Never>?

    fileprivate init() {}

    fileprivate func put(_ batch: [TaskRecord]) {
        let reader = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            batches.append(batch)
            defer { waiting = nil }
            return waiting
        }
        reader?.resume()
    }

    fileprivate func end(finished: [String: [TaskState: Int]], failure: (any Error)?) {
        let reader = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            self.finished = finished
            self.failure = failure
            ended = true
            defer { waiting = nil }
            return waiting
        }
        reader?.resume()
    }

    /// The next batch of tasks, once it is read; nil once every row was read. Throws what reading threw (a row
    /// that cannot be read, say). Call it from one task at a time.
    public func next() async throws -> [TaskRecord]? {
        while true {
            let taken = lock.withLock { () -> Result<[TaskRecord]?, any Error>? in
                if let failure { return .failure(failure) }
                if !batches.isEmpty { return .success(batches.removeFirst()) }
                return ended ? .success(nil) : nil
            }
            if let taken { return try taken.get() }
            await withCheckedContinuation { (reader: CheckedContinuation<Void, Never>) in
                // Looked at again under the lock: a batch put since the look above resumes the reader at once.
                let ready = lock.withLock { () -> Bool in
                    guard batches.isEmpty, !ended, failure == nil else { return true }
                    waiting = reader
                    return false
                }
                if ready { reader.resume() }
            }
        }
    }

    /// How many finished tasks each session has, per state: complete once `next()` has returned nil.
    public var finishedCounts: [String: [TaskState: Int]] {
        lock.withLock { finished }
    }
}
