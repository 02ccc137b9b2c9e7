// HalfTunesJournal: the crash-safe SQLite journal of sessions, tasks, events and resume tokens.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import GRDB
import HalfTunesProtocol

/// The journal: one SQLite database (`<state-dir>/journal.sqlite`, WAL mode) behind a serialized GRDB
/// `DatabaseQueue`, so it may be called from any thread. Every write goes through one writer thread in
/// submission order (`JournalWriter`: what was submitted meanwhile is written in one transaction); a public
/// write is written when the call returns, a `submit…` write later, and either is durable once `durability`
/// says so (group commit: one fsync of the WAL for every commit made meanwhile). Reads see every write
/// submitted before them. The layout and the write/recovery protocol are documented in docs/journal.md.
public final class Journal: Sendable {
    let dbQueue: DatabaseQueue
    private let gate = Gate()
    /// The database file, or nil for an in-memory journal.
    public let path: String?
    /// The number of schema migrations applied to this database (1 = "v1").
    public let schemaVersion: Int
    /// Which commits are on disk; answers and events wait for theirs.
    public let durability: JournalDurability

    /// Whether a write may still succeed: the journal is not closed and no fsync failed (after one, every write is
    /// refused for good). A write that failed while this is false is not worth trying again.
    public var takesWrites: Bool { gate.isOpen && durability.failure == nil }
    let writer: JournalWriter
    /// The finished rows `taskPage` read, forgotten as they change (FinishedRowCache.swift).
    let finishedRows = FinishedRowCache()

    /// The schema version this build writes (the number of migrations it knows).
    public static var latestSchemaVersion: Int { JournalSchema.migrations.count }
    /// How long a write waits for a lock held by another connection before failing with SQLITE_BUSY.
    public static let busyTimeout: Double = 10

    /// Opens (creating it with mode 0600 if missing) the journal at `path` and migrates it to the latest schema.
    /// The directory must exist.
    public convenience init(path: String) throws {
        try Journal.createFileIfMissing(path)
        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(path: path, configuration: Journal.configuration(walPath: path))
        } catch let error as JournalError {
            throw error
        } catch {
            throw JournalError.cannotOpen(path: path, reason: "\(error)")
        }
        try self.init(queue: queue, path: path)
    }

    /// A private in-memory journal with the same schema (for tests).
    static func openInMemory() throws -> Journal {
        try Journal(queue: try DatabaseQueue(configuration: configuration(walPath: nil)), path: nil)
    }

    init(queue: DatabaseQueue, path: String?) throws {
        let migrator = JournalSchema.migrator
        try queue.read { db in
            guard try migrator.hasBeenSuperseded(db) else { return }
            let known = Set(JournalSchema.migrations.map(\.identifier))
            let unknown = try migrator.appliedIdentifiers(db).subtracting(known).sorted()
            throw JournalError.newerSchema(path: path ?? ":memory:", unknownMigrations: unknown)
        }
        try migrator.migrate(queue)
        // A journal made before auto_vacuum was set, or with other pages than `pageSize`, is converted once (it
        // rewrites the file, before anything else uses it). SQLite changes the page size only outside WAL mode; the
        // rewrite is synced as a rollback journal's transaction is (FULL), so a crash leaves the old file or the new.
        if path != nil, try queue.read({ db in
            try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") != 2 || Int.fetchOne(db, sql: "PRAGMA page_size") != Self.pageSize
        }) {
            try queue.writeWithoutTransaction { db in
                _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = DELETE")
                try db.execute(sql: "PRAGMA synchronous = FULL")
                try db.execute(sql: "PRAGMA page_size = \(Self.pageSize)")
                try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
                try db.execute(sql: "VACUUM")
                let mode = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
                guard mode == "wal" else {
                    throw JournalError.cannotOpen(path: path ?? "", reason: "cannot switch back to WAL mode (got \(mode ?? "nil"))")
                }
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
            }
        }
        self.dbQueue = queue
        self.path = path
        self.durability = JournalDurability(walPath: path.map { $0 + "-wal" })
        // The migrations committed without an fsync: make them durable before anything builds on them.
        durability.didCommit(through: durability.issue())
        durability.sync()
        self.schemaVersion = try queue.read { try migrator.appliedMigrations($0).count }
        // Event seqs are handed out when events are submitted; never one used before, even if pruned since (each
        // session's `last_event_seq`) or deleted with its session (`event_seq_floor`).
        let lastSeq = try queue.read { db in
            max(try Int64.fetchOne(db, sql: "SELECT seq FROM event_seq_floor") ?? 0,
                try Int64.fetchOne(db, sql: "SELECT max(last_event_seq) FROM sessions") ?? 0,
                try Int64.fetchOne(db, sql: "SELECT max(seq) FROM events") ?? 0)
        }
        // Task ids too: handed out when an insert is submitted (`submitTasks`), never one used before.
        let lastTaskID = try queue.read { db in
            max(try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'tasks'") ?? 0,
                try Int64.fetchOne(db, sql: "SELECT max(id) FROM tasks") ?? 0)
        }
        self.writer = JournalWriter(dbQueue: queue, durability: durability, lastEventSeq: lastSeq, lastTaskID: lastTaskID)
        let changes = FinishedRowCache.RowChanges(finishedRows)
        queue.writeWithoutTransaction { db in db.add(transactionObserver: changes, extent: .databaseLifetime) }
    }

    /// Closes the database (SQLite checkpoints the WAL into the main file). Later calls throw `closed`;
    /// closing twice does nothing.
    public func close() throws {
        try gate.closing {
            writer.stop()
            durability.stop()
            try dbQueue.close()
        }
    }

    deinit {
        // On the writer's own thread (a queued read's caller dropped the last reference) nothing may wait for the
        // writer: it drains its queue and ends once this returns.
        let onWriter = writer.onWriterThread
        writer.stop()
        durability.stop(syncing: !onWriter)
    }

    /// Blocks until every write submitted so far is on disk.
    public func sync() { durability.sync() }

    /// Blocks until every write submitted so far is written (in SQLite's WAL: it survives the daemon's crash,
    /// not yet a power loss).
    public func waitUntilWritten() { writer.waitUntilWritten() }

    /// Where failures of submitted writes are reported (nobody waits for those).
    public func onSubmittedWriteFailure(_ handler: @escaping @Sendable (String) -> Void) {
        writer.setFailureHandler(handler)
    }

    /// Copies the WAL into the database and truncates it (`wal_checkpoint(TRUNCATE)`; the checkpoint fsyncs the
    /// database first), after a large transaction (an acknowledgement of many events, a sweep): else a restart
    /// after kill -9 reads every frame of it again, a cost that grows with what was deleted. Waits for the writes
    /// submitted before.
    public func truncateWAL() throws {
        try gate.open {
            writer.waitUntilWritten()
            try dbQueue.writeWithoutTransaction { db in _ = try Row.fetchAll(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        }
    }

    /// Transactions written so far, and the writes they held.
    public var writeCounts: (transactions: UInt64, writes: UInt64) { writer.counts }

    /// Runs `body` on the queue unless the journal is closed (GRDB must not touch a closed connection), once
    /// every write submitted before has been written.
    ///
    /// Not `DatabaseQueue.read`: it wraps every read in `PRAGMA query_only = 1` / `= 0`, and SQLite expires every
    /// prepared statement of the connection when a flag pragma changes, so each read made every cached statement
    /// (the writer's too) compile again on its next use — a quarter of the daemon's CPU under control-plane load
    /// when it was measured. The one connection runs reads and writes on one serial queue, so a read sees no
    /// write half done without a transaction of its own.
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        try gate.open {
            writer.waitUntilWritten()
            return try dbQueue.unsafeRead(body)
        }
    }

    /// Runs `query` (reads of this journal, e.g. `{ try $0.loadTasks(ids: ids) }`) on the writer's thread once
    /// every write submitted before this call is written, and returns its result: the caller's thread never
    /// blocks (an actor awaiting this runs other work meanwhile). It may also see writes submitted after this call
    /// (the writer writes everything queued in one transaction, then runs the reads queued with it). `query` must
    /// not write.
    public func reading<T: Sendable>(_ query: @escaping @Sendable (Journal) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
            writer.read { continuation.resume(with: Result { try query(self) }) }
        }
    }

    /// Runs `operation` (this journal's waited writes and reads, e.g. `{ try $0.ack(session: s, through: n) }`) on
    /// the writer's thread in its turn — after every write submitted before this call, before every one submitted
    /// after it — and returns its result: the caller's thread never blocks (an actor awaiting this serves other
    /// calls meanwhile). Each write it makes is a transaction of its own and carries no events. Durable once
    /// `durability` covers `durability.lastCommit` read after this call returns.
    public func writing<T: Sendable>(_ operation: @escaping @Sendable (Journal) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
            writer.operation({ continuation.resume(with: Result { try operation(self) }) },
                             stopped: { continuation.resume(throwing: JournalError.closed) })
        }
    }

    /// `writing` without waiting: `operation` is queued in its turn now and runs later; a failure goes to
    /// `onSubmittedWriteFailure`, and to the outcome returned, for a caller that awaits it after doing more.
    @discardableResult
    public func submitting(_ operation: @escaping @Sendable (Journal) throws -> Void) -> WriteOutcome {
        let outcome = WriteOutcome()
        writer.operation({
            do {
                try operation(self)
                outcome.resolve(nil)
            } catch {
                self.writer.reportFailure("\(error)")
                outcome.resolve(error)
            }
        }, stopped: {
            self.writer.reportFailure("the journal is closed: a write was dropped")
            outcome.resolve(JournalError.closed)
        })
        return outcome
    }

    /// Runs `body` in one write transaction on the writer (after every write submitted before) and waits for
    /// it (durable once `durability` covers `durability.lastCommit`). `events` are numbered for it.
    func write<T>(numbering events: [Event] = [], _ body: @escaping (Database, [Event]) throws -> T) throws -> T {
        try gate.open {
            precondition(!writer.onWriterThread || writer.inOperation, "a query run by Journal.reading must not write")
            try durability.checkWritable()
            return try writer.perform(events, body)
        }
    }

    func write<T>(_ body: @escaping (Database) throws -> T) throws -> T {
        try write { db, _ in try body(db) }
    }

    /// Queues `work` for the writer and returns at once (`events` numbered for it, returned so); a failure is
    /// reported to `onSubmittedWriteFailure`.
    /// `done`, if given, gets the write's outcome instead (on the writer's thread, once it is written: before it
    /// is durable).
    @discardableResult
    func submit(numbering events: [Event] = [], done: (@Sendable (Error?) -> Void)? = nil,
                _ work: @escaping (Database, [Event]) throws -> Void) throws -> [Event] {
        try gate.open {
            try durability.checkWritable()
            return writer.submit(events, done: done, work)
        }
    }

    /// The journal's page size. A state change of one task touches about ten pages (its row, the state indexes,
    /// its event and the event's indexes, the session's row), each written whole to the WAL and fsynced: at 4 KiB
    /// that was ~40 KiB per call, at 1 KiB ~10 KiB (docs/benchmarks.md). Rows larger than a page overflow into
    /// pages of their own, as before.
    static let pageSize = 1024

    static func configuration(walPath: String?) -> Configuration {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(busyTimeout)
        configuration.label = "HalfTunesJournal"
        configuration.prepareDatabase { db in
            // Pages freed by deleting finished tasks can be given back (`releaseFreePages`), and pages are small (a
            // commit writes each page it touched whole, twice: WAL, then checkpoint). Both take effect on a new
            // database (before its first table); an older one is converted once in `init` (`VACUUM`).
            try db.execute(sql: "PRAGMA page_size = \(pageSize)")
            try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
            // Set up here rather than with GRDB's `journalMode = .wal`, which also sets synchronous=NORMAL.
            if let walPath {
                let mode = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
                guard mode == "wal" else {
                    throw JournalError.cannotOpen(path: walPath, reason: "cannot switch to WAL mode (got \(mode ?? "nil"))")
                }
            }
            // Commits are not fsynced by SQLite: JournalDurability fsyncs the WAL once for every commit made
            // meanwhile (group commit), and nothing that depends on a commit happens before it is durable.
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        return configuration
    }

    /// Creates an empty database file readable only by its owner (an empty file is a valid empty database).
    static func createFileIfMissing(_ path: String) throws {
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd >= 0 {
            // The umask may only remove bits, but make the mode exact anyway.
            let chmodFailed = fchmod(fd, 0o600) != 0
            let code = errno
            closeDescriptor(fd)
            if chmodFailed { throw JournalError.cannotOpen(path: path, reason: String(cString: strerror(code))) }
            return
        }
        let code = errno
        if code == EEXIST { return }
        throw JournalError.cannotOpen(path: path, reason: String(cString: strerror(code)))
    }
}

/// Keeps calls and `close()` apart so that no call reaches a closed connection: `close()` waits until no call is
/// inside, and calls that come later throw `closed`. The lock is held only to count, never across a call (a call
/// may wait for the writer, whose thread runs queued reads that come through here too).
private final class Gate: @unchecked Sendable {
    private let condition = NSCondition()
    private var inside = 0
    private var closing = false
    private var isClosed = false

    /// Neither closed nor closing.
    var isOpen: Bool {
        condition.lock()
        defer { condition.unlock() }
        return !isClosed && !closing
    }

    func open<T>(_ body: () throws -> T) throws -> T {
        condition.lock()
        guard !isClosed, !closing else {
            condition.unlock()
            throw JournalError.closed
        }
        inside += 1
        condition.unlock()
        defer {
            condition.lock()
            inside -= 1
            if inside == 0 { condition.broadcast() }
            condition.unlock()
        }
        return try body()
    }

    func closing(_ body: () throws -> Void) throws {
        condition.lock()
        while closing { condition.wait() } // another close is under way: its outcome is this one's
        guard !isClosed else {
            condition.unlock()
            return
        }
        closing = true
        while inside > 0 { condition.wait() }
        condition.unlock()
        var closed = false
        defer {
            condition.lock()
            closing = false
            isClosed = closed
            condition.broadcast()
            condition.unlock()
        }
        try body()
        closed = true
    }
}

private func closeDescriptor(_ fd: Int32) {
    #if canImport(Glibc)
    _ = Glibc.close(fd)
    #elseif canImport(Darwin)
    _ = Darwin.close(fd)
    #endif
}
