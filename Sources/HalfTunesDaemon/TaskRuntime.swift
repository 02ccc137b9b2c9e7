import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol
import NIOConcurrencyHelpers

/// Bridges one running `Attempt` (of any task kind) to the daemon: checkpoints go straight to the journal
/// (after the partial file's fsync, on its callback queue); everything else is delivered to the core in order.
final class TaskRuntime: AttemptObserver, Sendable {
    enum Message: Sendable {
        /// A download's response was accepted.
        case started(ResponseStart)
        /// Response body bytes (a download's totals are positions in the file).
        case received(delta: Int64, total: Int64, expected: Int64?)
        /// An upload's file was opened: this attempt sends `bytes` bytes.
        case bodyOpened(bytes: Int64)
        case sent(delta: Int64, total: Int64, expected: Int64?)
        case finished(AttemptOutcome)
    }

    let taskID: Int64
    let messages: AsyncStream<Message>
    private let continuation: AsyncStream<Message>.Continuation
    private let journal: Journal
    /// The journaled durable ranges, guarded so that a checkpoint and a full row write never interleave.
    private let durable: NIOLockedValueBox<ByteRanges>
    /// The response of this attempt once accepted (a download's): checkpoints record it with the durable length.
    private let head = NIOLockedValueBox<Journal.CheckpointHead?>(nil)
    private let attempt = NIOLockedValueBox<Attempt?>(nil)
    private let runTask = NIOLockedValueBox<Task<AttemptOutcome, Never>?>(nil)
    /// Where a split download's extra connections are granted, and the task's host there.
    private let connections: HostConnections?
    private let host: String

    init(taskID: Int64, journal: Journal, durable: ByteRanges, connections: HostConnections? = nil, host: String = "") {
        self.taskID = taskID
        self.journal = journal
        self.connections = connections
        self.host = host
        self.durable = NIOLockedValueBox(durable)
        (messages, continuation) = AsyncStream.makeStream(of: Message.self)
    }

    var durableRanges: ByteRanges { durable.withLockedValue { $0 } }
    var durableBytes: Int64 { durable.withLockedValue { $0.count } }

    /// Runs `body` with the durable ranges held still (used for full journal row writes).
    func withDurableRanges<T>(_ body: (ByteRanges) throws -> T) rethrows -> T {
        try durable.withLockedValue { try body($0) }
    }

    func start(_ a: Attempt) {
        attempt.withLockedValue { $0 = a }
        let continuation = self.continuation
        runTask.withLockedValue {
            $0 = Task {
                let outcome = await a.run()
                // A complete download's last bytes were fsynced but not journaled: the core records them with
                // the publish intent (`AttemptVerdict`), one journal write fewer per download.
                if case .completed(let total, _) = outcome {
                    self.durable.withLockedValue { $0.insert(0..<total) }
                }
                self.connections?.release(self.host, task: self.taskID) // whatever a request left held
                continuation.yield(.finished(outcome))
                continuation.finish()
                return outcome
            }
        }
    }

    func stop() {
        attempt.withLockedValue { $0 }?.stop()
    }

    /// Waits for the attempt to end.
    func outcome() async -> AttemptOutcome? {
        guard let task = runTask.withLockedValue({ $0 }) else { return nil }
        return await task.value
    }

    // MARK: AttemptObserver

    func attemptDidStart(_ attempt: Attempt, _ start: ResponseStart) {
        head.withLockedValue {
            $0 = Journal.CheckpointHead(etag: start.validators.etag, lastModified: start.validators.lastModified,
                                        bytesExpected: start.expectedTotal, currentURL: start.finalURL)
        }
        continuation.yield(.started(start))
    }

    func attemptDidReceive(_ attempt: Attempt, bytes: Int64, totalBytes: Int64, totalBytesExpected: Int64?) {
        continuation.yield(.received(delta: bytes, total: totalBytes, expected: totalBytesExpected))
    }

    func attemptDidCheckpoint(_ attempt: Attempt, durable ranges: ByteRanges) {
        let head = self.head.withLockedValue { $0 }
        durable.withLockedValue { value in
            guard ranges != value else { return } // journaled already
            // The data is fsynced: record its ranges (with the response it came from), submitted to the
            // journal's writer. If the journal write fails the old ranges stay recorded; what they share with
            // the new ones is still durable, which is safe (more is re-fetched after a crash).
            do {
                try journal.submitCheckpoint(task: taskID, durable: ranges, head: head)
                value = ranges
            } catch {
                value = value.intersection(ranges)
            }
        }
    }

    func attemptWantsConnection(_ attempt: Attempt) -> Bool {
        guard let connections else { return false }
        return connections.tryAcquire(host, task: taskID, shed: { [weak attempt] n in attempt?.shedConnections(n) })
    }

    func attemptReleasedConnection(_ attempt: Attempt) {
        connections?.release(host, task: taskID, count: 1)
    }

    func attemptConnectionRefused(_ attempt: Attempt, retryAfter: Double?) {
        connections?.refused(host, retryAfter: retryAfter)
    }

    func attemptDidOpenBody(_ attempt: Attempt, bytesExpectedToSend: Int64) {
        continuation.yield(.bodyOpened(bytes: bytesExpectedToSend))
    }

    func attemptDidSend(_ attempt: Attempt, bytes: Int64, totalBytes: Int64, totalBytesExpected: Int64?) {
        continuation.yield(.sent(delta: bytes, total: totalBytes, expected: totalBytesExpected))
    }
}
