import HalfTunesEngine
import HalfTunesJournal
import NIOConcurrencyHelpers

/// Bridges one running transfer (a download's `Transfer`, or an upload's or data task's `Exchange`) to the
/// daemon: checkpoints go straight to the journal (after the transfer's fsync, on its write queue);
/// everything else is delivered to the core in order.
final class TaskRuntime: TransferObserver, ExchangeObserver, @unchecked Sendable {
    enum Message: Sendable {
        case started(ResponseStart)
        case progress(delta: Int64, total: Int64, expected: Int64?)
        case finished(TransferOutcome)
        /// Uploads and data tasks (see DaemonCore+Exchanges.swift).
        case exchange(ExchangeMessage)
    }

    enum ExchangeMessage: Sendable {
        /// The upload's source was opened: this attempt sends `bytes` bytes.
        case sourceOpened(bytes: Int64)
        case sent(delta: Int64, total: Int64, expected: Int64?)
        case received(delta: Int64, total: Int64, expected: Int64?)
        case finished(ExchangeOutcome)
    }

    let taskID: Int64
    let messages: AsyncStream<Message>
    private let continuation: AsyncStream<Message>.Continuation
    private let journal: Journal
    /// The durable length, guarded so that a checkpoint and a full row write never interleave.
    private let durable: NIOLockedValueBox<Int64>
    private let transfer = NIOLockedValueBox<Transfer?>(nil)
    private let exchange = NIOLockedValueBox<Exchange?>(nil)
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

    /// Runs an upload's or data task's attempt. `outcome()` then reports `.stopped(0)`, `.failed` or
    /// `.completed(totalBytes: <response body bytes>)`: callers only wait on it.
    func start(_ e: Exchange) {
        exchange.withLockedValue { $0 = e }
        let continuation = self.continuation
        runTask.withLockedValue {
            $0 = Task {
                let outcome = await e.run()
                continuation.yield(.exchange(.finished(outcome)))
                continuation.finish()
                switch outcome {
                case .completed(let response):
                    return .completed(totalBytes: response.bodyBytes, validators: Validators(etag: nil, lastModified: nil))
                case .stopped: return .stopped(durableBytes: 0)
                case .failed(let failure, _): return .failed(failure)
                }
            }
        }
    }

    func stop() {
        transfer.withLockedValue { $0 }?.stop()
        exchange.withLockedValue { $0 }?.stop()
    }

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

    // MARK: ExchangeObserver

    func exchangeDidOpenSource(_ exchange: Exchange, bytesExpectedToSend: Int64) {
        continuation.yield(.exchange(.sourceOpened(bytes: bytesExpectedToSend)))
    }

    func exchangeDidSend(_ exchange: Exchange, bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64?) {
        continuation.yield(.exchange(.sent(delta: bytesSent, total: totalBytesSent, expected: totalBytesExpectedToSend)))
    }

    func exchangeDidReceive(_ exchange: Exchange, bytesReceived: Int64, totalBytesReceived: Int64, totalBytesExpected: Int64?) {
        continuation.yield(.exchange(.received(delta: bytesReceived, total: totalBytesReceived, expected: totalBytesExpected)))
    }
}
