import HalfTunesEngine
import HalfTunesJournal
import NIOConcurrencyHelpers

/// Bridges one running transfer to the daemon: checkpoints go straight to the journal (after the
/// transfer's fsync, on its write queue); everything else is delivered to the core in order.
final class TaskRuntime: TransferObserver, @unchecked Sendable {
    enum Message: Sendable {
        case started(ResponseStart)
        case progress(delta: Int64, total: Int64, expected: Int64?)
        case finished(TransferOutcome)
    }

    let taskID: Int64
    let messages: AsyncStream<Message>
    private let continuation: AsyncStream<Message>.Continuation
    private let journal: Journal
    /// The durable length, guarded so that a checkpoint and a full row write never interleave.
    private let durable: NIOLockedValueBox<Int64>
    private let transfer = NIOLockedValueBox<Transfer?>(nil)
    private let runTask = NIOLockedValueBox<Task<TransferOutcome, Never>?>(nil)

    init(taskID: Int64, journal: Journal, durableBytes: Int64) {
        self.taskID = taskID
        self.journal = journal
        self.durable = NIOLockedValueBox(durableBytes)
        (messages, continuation) = AsyncStream.makeStream(of: Message.self)
    }

    var durableBytes: Int64 { durable.withLockedValue { $0 } }

    /// Runs `body` with the durable length held still (used for full journal row writes).
    func withDurableBytes<T>(_ body: (Int64) throws -> T) rethrows -> T {
        try durable.withLockedValue { try body($0) }
    }

    func start(_ t: Transfer) {
        transfer.withLockedValue { $0 = t }
        let continuation = self.continuation
        runTask.withLockedValue {
            $0 = Task {
                let outcome = await t.run()
                continuation.yield(.finished(outcome))
                continuation.finish()
                return outcome
            }
        }
    }

    func stop() { transfer.withLockedValue { $0 }?.stop() }

    /// Waits for the transfer to end.
    func outcome() async -> TransferOutcome? {
        guard let task = runTask.withLockedValue({ $0 }) else { return nil }
        return await task.value
    }

    // MARK: TransferObserver

    func transferDidStart(_ transfer: Transfer, _ start: ResponseStart) {
        continuation.yield(.started(start))
    }

    func transferDidWrite(_ transfer: Transfer, bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpected: Int64?) {
        continuation.yield(.progress(delta: bytesWritten, total: totalBytesWritten, expected: totalBytesExpected))
    }

    func transferDidCheckpoint(_ transfer: Transfer, durableBytes: Int64) {
        durable.withLockedValue { value in
            // The data is fsynced: record its length. If the journal write fails the old, smaller
            // length stays recorded, which is still safe (more is re-fetched after a crash).
            do {
                try journal.recordCheckpoint(task: taskID, bytesDurable: durableBytes)
                value = durableBytes
            } catch {
                value = min(value, durableBytes)
            }
        }
    }
}
