// Group commit: commits return once SQLite has written them; one syncer thread fsyncs the WAL for all of them.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// When the journal's commits are durable. SQLite runs with `synchronous=NORMAL`: a commit appends its frames
/// to the WAL and returns without an fsync. Each write takes the next number when it is submitted (`issue`,
/// `lastCommit`) and counts as committed once `JournalWriter` has written it (`didCommit(through:)`). The WAL is
/// fsynced whenever commits are waiting, and every commit up to the number seen then is declared durable, so
/// commits that arrive while an fsync runs share the next one (group commit, no timer: no delay when idle,
/// batches under load). The writer does that fsync itself when it has nothing else queued and no fsync is
/// running (`syncWritten(inline:)`): one thread woken per commit fewer. Otherwise a syncer thread of its own
/// (off Swift's cooperative pool) does it while the writer writes on. Whoever must not act before a commit is
/// durable — an answer to a client, an event, a file moved into place — waits for its number
/// (`whenDurable`, `sync`).
///
/// A WAL fsynced after the commits is what `synchronous=FULL` gives: the frames carry checksums and SQLite's
/// recovery keeps every commit whose frames reached the disk. If an fsync fails the commits it should have
/// covered are not known to be durable: the journal is marked failed (`failure`), every later write throws, and
/// the waiters are released so nothing hangs.
public final class JournalDurability: @unchecked Sendable {
    private let condition = NSCondition()
    /// The latest number handed out to a write, and the latest write committed (every earlier one is too).
    private var issued: UInt64 = 0
    private var committed: UInt64 = 0
    private var synced: UInt64 = 0
    /// The commits whose `whenDurable` callbacks have run (`sync()` waits for these, not just for the fsync).
    private var notified: UInt64 = 0
    private var stopped = false
    /// An fsync is running (the syncer's or the writer's): no other starts meanwhile.
    private var syncing = false
    /// Threads blocked in `sync()`: only then (or when the syncer has work) is the condition broadcast after an
    /// fsync, so the idle syncer is not woken for nothing.
    private var syncWaiters = 0
    private var waiters: [(ticket: UInt64, action: @Sendable () -> Void)] = []
    private var failed: String?
    private var fsyncs: UInt64 = 0
    /// Tests: while true the syncer starts no fsync, so commits pile up and one fsync must cover them all.
    private var heldForTesting = false
    /// The seqs of events whose write failed (`withdraw`): numbered when submitted, maybe sent already to
    /// connections that hold them until their commit is durable, but in no journal. Kept for the daemon's life
    /// (only failed writes add to it: a full disk or an I/O error).
    private var withdrawnSeqs: Set<Int64> = []

    func holdForTesting(_ hold: Bool) {
        condition.lock()
        heldForTesting = hold
        condition.broadcast()
        condition.unlock()
    }
    /// The WAL file to fsync, or nil for an in-memory journal (every commit is "durable" at once).
    private let walPath: String?
    private var walDescriptor: Int32 = -1
    private var thread: Thread?

    init(walPath: String?) {
        self.walPath = walPath
        guard walPath != nil else { return }
        // The thread holds the object until `stop()` ends it (Journal's close or deinit).
        let thread = Thread { self.run() }
        thread.name = "halftunes-journal-sync"
        self.thread = thread
        thread.start()
    }

    /// The number of the latest write submitted: once it is durable, so is everything submitted before this call.
    public var lastCommit: UInt64 {
        condition.lock()
        defer { condition.unlock() }
        return issued
    }

    /// The next number, for a write being submitted (`JournalWriter`, in submission order).
    func issue() -> UInt64 {
        condition.lock()
        defer { condition.unlock() }
        issued += 1
        return issued
    }

    /// The events of a write that failed will never be journaled: whoever holds them until their commit is
    /// durable drops them instead (`isWithdrawn`). Called by `JournalWriter` before it counts the write committed.
    func withdraw(_ seqs: [Int64]) {
        guard !seqs.isEmpty else { return }
        condition.lock()
        withdrawnSeqs.formUnion(seqs)
        condition.unlock()
    }

    /// Whether the event `seq` belongs to a write that failed (asked once its commit is durable: the answer is
    /// final then).
    public func isWithdrawn(_ seq: Int64) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return withdrawnSeqs.contains(seq)
    }

    /// Whether commit `ticket` (and every one before it) is on disk.
    public func isDurable(_ ticket: UInt64) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return ticket <= synced
    }

    /// How many fsyncs of the WAL made commits durable (fewer than commits under load: group commit).
    public var syncCount: UInt64 {
        condition.lock()
        defer { condition.unlock() }
        return fsyncs
    }

    /// Why the journal can no longer promise durability (an fsync failed), or nil.
    public var failure: String? {
        condition.lock()
        defer { condition.unlock() }
        return failed
    }

    /// Runs `action` once commit `ticket` is durable: at once on this thread if it already is, else on the
    /// thread that made the fsync covering it (the syncer's or the writer's), right after it (keep it short; it
    /// must not wait for the journal).
    public func whenDurable(_ ticket: UInt64, _ action: @escaping @Sendable () -> Void) {
        condition.lock()
        if ticket <= synced {
            condition.unlock()
            action()
            return
        }
        // No signal: a waiter changes nothing the syncer waits for (`committed`, told by `didCommit`); waking it
        // here woke it for nothing on most answers (a futex wake and a context switch each).
        waiters.append((ticket, action))
        condition.unlock()
    }

    /// Blocks until every write submitted before this call is durable (for an irreversible step that depends
    /// on the journal, such as moving a finished file into place after its intent was journaled), and the
    /// `whenDurable` callbacks of those writes have run.
    public func sync() {
        condition.lock()
        defer { condition.unlock() }
        let target = issued
        syncWaiters += 1
        defer { syncWaiters -= 1 }
        while notified < target {
            condition.broadcast()
            condition.wait()
        }
    }

    /// Counts the writes through `ticket` committed (called by `JournalWriter` after each transaction). Nothing
    /// syncs them yet: the writer calls `syncWritten(inline:)` once it has written what it took.
    func didCommit(through ticket: UInt64) {
        condition.lock()
        committed = max(committed, ticket)
        if walPath == nil {
            synced = committed
            notified = committed
            condition.broadcast()
        }
        condition.unlock()
    }

    /// Makes the committed writes durable: with `inline` (the writer has nothing else queued), on the caller's
    /// thread if no fsync is running; else the syncer does it (woken if idle; a running fsync is followed by the
    /// next one anyway).
    func syncWritten(inline: Bool) {
        condition.lock()
        guard walPath != nil, committed > synced else {
            condition.unlock()
            return
        }
        if inline && !syncing && !heldForTesting && !stopped {
            syncing = true
            let target = committed
            condition.unlock()
            performSync(through: target)
            return
        }
        if !syncing { condition.broadcast() }
        condition.unlock()
    }

    /// Throws when an earlier fsync failed: from then on the journal refuses writes instead of claiming them.
    func checkWritable() throws {
        if let failed = failure { throw JournalError.syncFailed(reason: failed) }
    }

    /// Syncs what is left and stops the syncer thread (at close). Without `syncing` (a journal released on its
    /// writer's thread) it stops without waiting for what the writer has not written yet.
    func stop(syncing: Bool = true) {
        if syncing { sync() }
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
        while thread != nil, !thread!.isFinished { usleep(1000) }
        if walDescriptor >= 0 { _ = close(walDescriptor) }
        walDescriptor = -1
    }

    private func run() {
        while true {
            condition.lock()
            // A running fsync (the writer's) is waited for even when stopping: one fsync at a time.
            while syncing || ((synced >= committed || heldForTesting) && !stopped) { condition.wait() }
            if stopped && synced >= committed {
                condition.unlock()
                return
            }
            syncing = true
            let target = committed
            condition.unlock()
            performSync(through: target)
        }
    }

    /// fsyncs the WAL, declares the commits through `target` durable and runs their callbacks (`syncing` was
    /// set by the caller, under the lock).
    private func performSync(through target: UInt64) {
        let error = syncWAL()

        condition.lock()
        if let error, failed == nil { failed = error }
        fsyncs += 1
        synced = max(synced, target)
        let reached = synced
        let ready = waiters.filter { $0.ticket <= reached }
        waiters.removeAll { $0.ticket <= reached }
        condition.unlock()
        for waiter in ready { waiter.action() }
        // Only now is `sync()` told: whoever waited for these commits has been told first.
        condition.lock()
        notified = max(notified, reached)
        syncing = false
        // Wake the syncer only for work (commits made meanwhile, stopping) or a `sync()` waiting.
        if syncWaiters > 0 || stopped || committed > synced { condition.broadcast() }
        condition.unlock()
    }

    /// fsyncs the WAL (reopened if SQLite replaced the file); the first time, its directory too, so the WAL's
    /// name survives as well. Later syncs are `fdatasync`: the frames and the file's length, without writing the
    /// inode for its modification time each time. Returns the error text on failure.
    private func syncWAL() -> String? {
        guard let walPath else { return nil }
        var st = stat()
        // SQLite replaces the WAL only by deleting it (the one connection closing, or leaving WAL mode): the file
        // held open then has no link left. `fstat`, not `stat` of the path: no path lookup on every commit.
        if walDescriptor >= 0, fstat(walDescriptor, &st) == 0, st.st_nlink > 0 {
            return fdatasync(walDescriptor) == 0 ? nil : "fdatasync of \(walPath): \(String(cString: strerror(errno)))"
        }
        if walDescriptor >= 0 { _ = close(walDescriptor) }
        walDescriptor = open(walPath, O_RDONLY | O_CLOEXEC)
        guard walDescriptor >= 0 else {
            // No WAL: SQLite checkpointed it into the main file (which a checkpoint fsyncs) and removed it.
            return errno == ENOENT ? nil : "open of \(walPath): \(String(cString: strerror(errno)))"
        }
        guard fsync(walDescriptor) == 0 else { return "fsync of \(walPath): \(String(cString: strerror(errno)))" }
        let directory = (walPath as NSString).deletingLastPathComponent
        let fd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { _ = close(fd) }
        return fsync(fd) == 0 ? nil : "fsync of \(directory): \(String(cString: strerror(errno)))"
    }
}
