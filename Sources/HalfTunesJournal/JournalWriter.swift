// The journal's one writer: writes run in submission order on a thread of their own, gathered into one transaction.
import Foundation
import GRDB
import HalfTunesProtocol

/// Every write of the journal goes through here, in the order it was submitted: a thread of its own (off
/// Swift's cooperative pool) takes everything submitted since its last transaction and writes it in ONE
/// transaction (if one fails, each is written again alone, so one that fails takes nothing else with it), then
/// counts it committed for `JournalDurability`, which makes it durable with one fsync (on this thread when nothing
/// else is queued).
///
/// A write is either waited for (`perform`: the caller gets its result or error, as a plain SQLite write) or
/// submitted (`submit`: the caller goes on at once; a failure is reported to `failureHandler`). Each takes a
/// ticket when it is submitted (`JournalDurability.issue`), so whoever must not act before it is durable (an
/// answer, an event, a file moved into place) waits for exactly that. Journaled events are numbered when they
/// are submitted, so their `seq`s follow the submission order and are known at once. A read first waits until
/// every write submitted before it has been written (`waitUntilWritten`): reads see every earlier write.
final class JournalWriter: @unchecked Sendable {
    typealias Work = (Database) throws -> Void

    private struct Item {
        let ticket: UInt64
        let kind: Kind

        enum Kind {
            /// A write, gathered with the writes next to it into one transaction. `done`: the waiting caller
            /// (`perform`), or the submitter's outcome; nil for a submitted write (failures to `failureHandler`).
            /// `seqs`: the write's numbered events, withdrawn if it fails (`JournalDurability.withdraw`).
            case write(Work, seqs: [Int64], done: ((Error?) -> Void)?)
            /// A read (`read(_:)`): run outside any transaction, after the transaction of the writes taken with it.
            case read(() -> Void)
            /// An operation (`operation(_:)`): the journal's waited writes and reads, run in its turn — after the
            /// writes submitted before it, before those submitted after it — each of its writes a transaction of its
            /// own, on this thread.
            case operation(() -> Void)
        }
    }

    private let condition = NSCondition()
    private var queue: [Item] = []
    /// The ticket of the latest write submitted, and of the latest one written (every earlier one is too).
    private var submitted: UInt64
    private var written: UInt64
    private var lastEventSeq: Int64
    /// The latest task id handed out (`numberTasks`): ids are known when an insert is submitted, like seqs.
    private var lastTaskID: Int64
    private var stopped = false
    /// A batch (or an inline write, see `perform`) is being written: nothing else is started meanwhile.
    private var writing = false
    /// Tests: while true the writer takes nothing from the queue, so submitted writes pile up into one batch.
    private var heldForTesting = false
    private var failureHandler: (@Sendable (String) -> Void)?
    private var thread: Thread?
    /// The writer's own thread, once it runs: a read it runs waits for nothing (see `waitUntilWritten`).
    private var writerThread: pthread_t?
    /// The ticket of the operation the writer's thread is running, if any (its waited writes run inline).
    private var operationTicket: UInt64?
    private let dbQueue: DatabaseQueue
    private let durability: JournalDurability
    private var transactions: UInt64 = 0
    private var writes: UInt64 = 0

    init(dbQueue: DatabaseQueue, durability: JournalDurability, lastEventSeq: Int64, lastTaskID: Int64) {
        self.dbQueue = dbQueue
        self.durability = durability
        self.lastEventSeq = lastEventSeq
        self.lastTaskID = lastTaskID
        submitted = durability.lastCommit
        written = submitted
        // The thread holds the writer until `stop()` ends it (Journal's close or deinit).
        let thread = Thread { self.run() }
        thread.name = "halftunes-journal-write"
        self.thread = thread
        thread.start()
    }

    func setFailureHandler(_ handler: @escaping @Sendable (String) -> Void) {
        condition.lock()
        failureHandler = handler
        condition.unlock()
    }

    /// Queues `work`; returns `events` numbered with the next `seq`s (the journaled ones; `work` gets them so).
    @discardableResult
    func submit(_ events: [Event] = [], done: ((Error?) -> Void)? = nil,
                _ work: @escaping (Database, [Event]) throws -> Void) -> [Event] {
        condition.lock()
        defer { condition.unlock() }
        let numbered = number(events)
        submitted = durability.issue()
        queue.append(Item(ticket: submitted, kind: .write({ db in try work(db, numbered) },
                                                           seqs: numbered.compactMap(\.seq), done: done)))
        condition.signal()
        return numbered
    }

    /// Queues `body` and waits until it is written; returns its result or throws its error. When nothing is
    /// queued or being written, it is written at once on the caller's thread instead (no hand-off to wait for),
    /// in its turn all the same: what is submitted meanwhile waits for it.
    func perform<T>(_ events: [Event] = [], _ body: @escaping (Database, [Event]) throws -> T) throws -> T {
        condition.lock()
        if operationTicket != nil, let writerThread, pthread_equal(writerThread, pthread_self()) != 0 {
            // Inside an operation, in its turn: written at once, as part of it (its events, if any, would be numbered
            // after writes submitted meanwhile and written before them: operations carry none).
            precondition(events.isEmpty, "a journal operation's writes carry no events")
            condition.unlock()
            let result = Result { try dbQueue.write { db in try body(db, []) } }
            counted(writes: 1)
            return try result.get()
        }
        if queue.isEmpty && !writing && !heldForTesting && !stopped {
            writing = true
            let numbered = number(events)
            submitted = durability.issue()
            let ticket = submitted
            condition.unlock()
            let result = Result { try dbQueue.write { db in try body(db, numbered) } }
            if case .failure = result { durability.withdraw(numbered.compactMap(\.seq)) }
            didWrite(through: ticket, writes: 1)
            durability.syncWritten(inline: false) // the caller waits for the write, not for its fsync
            condition.lock()
            writing = false
            condition.broadcast()
            condition.unlock()
            return try result.get()
        }
        condition.unlock()
        let finished = DispatchSemaphore(value: 0)
        var result: Result<T, Error>?
        submit(events, done: { error in
            if let error { result = .failure(error) }
            finished.signal()
        }) { db, numbered in
            result = .success(try body(db, numbered))
        }
        finished.wait()
        return try result!.get()
    }

    /// Queues `body` to run on the writer's thread once every write submitted before it is written, outside any
    /// transaction (the journal's reads, called from there, see the committed writes and wait for nothing).
    /// The caller does not wait: no thread blocks until the writer gets to it. After `stop()`, `body` runs at
    /// once on the caller's thread (the journal's reads then throw `closed`). `body` must only read.
    func read(_ body: @escaping () -> Void) {
        condition.lock()
        guard !stopped else {
            condition.unlock()
            body()
            return
        }
        queue.append(Item(ticket: submitted, kind: .read(body)))
        condition.signal()
        condition.unlock()
    }

    /// Queues `body` to run on the writer's thread in its turn: after every write submitted before it is written,
    /// and before any submitted after it. The journal's waited writes called from `body` are written there and
    /// then, each in a transaction of its own (they carry no events), and its reads wait for nothing; the caller
    /// does not wait. Durable once `durability` covers the ticket it took. After `stop()`, `stopped` runs instead.
    func operation(_ body: @escaping () -> Void, stopped whenStopped: @escaping () -> Void) {
        condition.lock()
        guard !stopped else {
            condition.unlock()
            whenStopped()
            return
        }
        submitted = durability.issue()
        queue.append(Item(ticket: submitted, kind: .operation(body)))
        condition.signal()
        condition.unlock()
    }

    /// Whether the caller is an operation the writer's thread runs (`operation(_:stopped:)`): it may write.
    var inOperation: Bool {
        condition.lock()
        defer { condition.unlock() }
        guard let writerThread, operationTicket != nil else { return false }
        return pthread_equal(writerThread, pthread_self()) != 0
    }

    /// Reports the failure of a submitted operation (nobody waits for it).
    func reportFailure(_ message: String) {
        condition.lock()
        let handler = failureHandler
        condition.unlock()
        handler?(message)
    }

    /// Whether the caller runs on the writer's thread (a read queued by `read(_:done:)`).
    var onWriterThread: Bool {
        condition.lock()
        defer { condition.unlock() }
        guard let writerThread else { return false }
        return pthread_equal(writerThread, pthread_self()) != 0
    }

    func holdForTesting(_ hold: Bool) {
        condition.lock()
        heldForTesting = hold
        condition.broadcast()
        condition.unlock()
    }

    /// Tests: how many items are queued.
    var queuedCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return queue.count
    }

    /// Transactions written, and the writes they held (how much the batching gathers).
    var counts: (transactions: UInt64, writes: UInt64) {
        condition.lock()
        defer { condition.unlock() }
        return (transactions, writes)
    }

    /// The events with the next `seq`s, in order (under the lock: the order of submission).
    private func number(_ events: [Event]) -> [Event] {
        var numbered = events
        for i in numbered.indices {
            // At Int64.max (a journal edited by hand) the seq repeats: the write fails on the primary key, clearly.
            if lastEventSeq < Int64.max { lastEventSeq += 1 }
            numbered[i].seq = lastEventSeq
        }
        return numbered
    }

    /// The next `count` task ids, in order: never one handed out before (even if its insert failed), so a new
    /// task's id is known before its row is written and every write about it can be submitted at once.
    /// Throws `tasksExhausted` when fewer than `count` ids are left (a journal edited to ids near Int64.max).
    func numberTasks(_ count: Int) throws(JournalError) -> [Int64] {
        condition.lock()
        defer { condition.unlock() }
        guard count >= 0, lastTaskID <= Int64.max - Int64(count) else { throw JournalError.tasksExhausted }
        guard count > 0 else { return [] }
        let first = lastTaskID + 1
        lastTaskID += Int64(count)
        return Array(first...lastTaskID)
    }

    /// Blocks until every write submitted before this call has been written.
    /// On the writer's own thread (a queued read) it returns at once: what was submitted before the read is
    /// written, and what was submitted after it must not be waited for there.
    func waitUntilWritten() {
        condition.lock()
        defer { condition.unlock() }
        if let writerThread, pthread_equal(writerThread, pthread_self()) != 0 { return }
        let target = submitted
        while written < target { condition.wait() }
    }

    /// Writes what is queued and ends the thread (at close).
    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
        // Not on the writer's own thread (the journal's last reference dropped by a queued read's caller): it
        // ends after this, having drained the queue.
        if onWriterThread { return }
        while let thread, !thread.isFinished { usleep(1000) }
    }

    /// One transaction of `count` writes through `ticket` was written: readers waiting for it go on, the next
    /// batch may start, and `durability` counts it committed.
    private func didWrite(through ticket: UInt64, writes count: Int) {
        condition.lock()
        written = ticket
        transactions += UInt64(count > 0 ? 1 : 0)
        writes += UInt64(count)
        condition.broadcast()
        condition.unlock()
        durability.didCommit(through: ticket)
    }

    /// A transaction of an operation's, counted (the operation counts as written once it returns).
    private func counted(writes count: Int) {
        condition.lock()
        transactions += 1
        writes += UInt64(count)
        condition.unlock()
    }

    private func run() {
        condition.lock()
        writerThread = pthread_self()
        condition.unlock()
        while true {
            condition.lock()
            while (queue.isEmpty || heldForTesting || writing) && !stopped { condition.wait() }
            while writing { condition.wait() } // an inline write finishes first, even when stopping
            if queue.isEmpty {
                writerThread = nil
                condition.unlock()
                return
            }
            // Everything queued: the writes in as few transactions as the operations between them allow (one,
            // when there is none), each operation in its turn, then every read. A read sees the writes submitted
            // before it, and may see later ones (it never waits for them), so reads do not cut the batch in
            // pieces: under control-plane load they came between almost every two writes.
            let taken = queue
            queue.removeAll(keepingCapacity: true)
            writing = true
            let onFailure = failureHandler
            condition.unlock()

            var segment: [(ticket: UInt64, work: Work, seqs: [Int64], done: ((Error?) -> Void)?)] = []
            func flush() {
                guard !segment.isEmpty else { return }
                let errors = write(segment.map(\.work))
                // Failures nobody waits for are reported, and every failed write's events withdrawn, before the
                // writes count as written (and so before they can count as durable).
                for (item, error) in zip(segment, errors) {
                    guard let error else { continue }
                    durability.withdraw(item.seqs)
                    if item.done == nil { onFailure?("\(error)") }
                }
                didWrite(through: segment[segment.count - 1].ticket, writes: segment.count)
                for (item, error) in zip(segment, errors) { item.done?(error) }
                segment.removeAll(keepingCapacity: true)
            }
            for item in taken {
                switch item.kind {
                case let .write(work, seqs, done):
                    segment.append((item.ticket, work, seqs, done))
                case .read:
                    continue
                case .operation(let body):
                    flush()
                    durability.syncWritten(inline: false) // the writes before it are synced while it runs
                    condition.lock()
                    operationTicket = item.ticket
                    condition.unlock()
                    body()
                    condition.lock()
                    operationTicket = nil
                    condition.unlock()
                    didWrite(through: item.ticket, writes: 0)
                }
            }
            flush()
            for item in taken {
                if case .read(let read) = item.kind { read() }
            }
            condition.lock()
            writing = false
            condition.broadcast()
            let idle = queue.isEmpty
            condition.unlock()
            // Nothing more to write: this thread fsyncs what it wrote (no hand-off to the syncer); else the
            // syncer does while the next batch is written.
            durability.syncWritten(inline: idle)
        }
    }

    /// Writes the batch in one transaction; if any write fails, or the transaction itself (its commit: a full
    /// disk, an I/O error), nothing of it stays and each write is made again in a transaction of its own, so each
    /// gets its own outcome: the same outcomes, in the same order, as a savepoint per write gave, without the
    /// `SAVEPOINT` and `RELEASE` every write paid for (~3 % of the daemon's CPU under the control-plane load,
    /// stop 50) when a write of a batch almost never fails. Returns each write's error, or nil.
    private func write(_ batch: [Work]) -> [Error?] {
        var errors = [Error?](repeating: nil, count: batch.count)
        do {
            try dbQueue.write { db in
                for work in batch { try work(db) } // the first error rolls the whole transaction back
            }
        } catch {
            if batch.count == 1 { return [error] }
            for (i, work) in batch.enumerated() {
                do {
                    try dbQueue.write { db in try work(db) }
                    errors[i] = nil
                } catch {
                    errors[i] = error
                }
            }
        }
        return errors
    }
}
