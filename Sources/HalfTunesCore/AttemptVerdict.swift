// What the end of an attempt means for its task, for every kind: a pure function of the outcome (no I/O).
import HalfTunesProtocol

/// The core's decision when an attempt ends (the runner, `DaemonCore.attemptEnded`, carries it out).
public struct AttemptVerdict: Sendable, Equatable {
    /// A download's durable ranges after the attempt, to record in its row (nil for uploads and data tasks,
    /// whose attempts keep nothing).
    public var durable: ByteRanges?
    /// How many bytes of a download are durable.
    public var durableBytes: Int64? { durable?.count }
    public var next: Next

    public enum Next: Sendable, Equatable {
        /// The task was no longer running (suspended, canceled, the daemon shutting down): keep its state and
        /// record its row.
        case record
        /// Every byte of a download is durable: verify and publish it (`CompletionMachine`).
        case beginCompletion(totalBytes: Int64)
        /// An upload or data task got its whole 2xx response: the task completes with it.
        case complete(TaskResponse)
        /// The attempt failed: this input goes to the task's state machine (a transient failure waits and
        /// retries, with jitter; a permanent one fails the task), and `keepResponse` goes with the task.
        case fail(TaskStateMachine.Input, keepResponse: TaskResponse?)
    }

    public init(durable: ByteRanges?, next: Next) {
        self.durable = durable
        self.next = next
    }

    /// A verdict keeping the first `durableBytes` of a download.
    public init(durableBytes: Int64?, next: Next) {
        self.init(durable: durableBytes.map { ByteRanges(prefix: $0) }, next: next)
    }

    /// `jitterSample` (0..<1) spreads the retry times of transient failures.
    public static func of(_ outcome: AttemptOutcome, kind: TaskKind, stillRunning: Bool,
                          jitterSample: Double) -> AttemptVerdict {
        let durable = kind == .download ? outcome.durable : nil
        guard stillRunning else { return AttemptVerdict(durable: durable, next: .record) }
        switch outcome {
        case .completed(let total, _):
            return AttemptVerdict(durable: durable, next: .beginCompletion(totalBytes: total))
        case .responded(let response):
            return AttemptVerdict(durable: durable, next: .complete(response))
        case let .failed(failure, response):
            let input = TaskStateMachine.Input.transferFailed(failure.error, transient: failure.isTransient,
                                                              retryAfter: failure.retryAfter, jitterSample: jitterSample)
            // A permanent failure keeps the response that explains it; a transient one is retried from scratch.
            return AttemptVerdict(durable: durable, next: .fail(input, keepResponse: failure.isTransient ? nil : response))
        case .stopped:
            // Stopped without being asked (should not happen): retry soon rather than lose the task.
            let error = TaskError(code: TaskErrorCode.connectionLost, message: "The transfer stopped unexpectedly")
            let input = TaskStateMachine.Input.transferFailed(error, transient: true, retryAfter: nil,
                                                              jitterSample: jitterSample)
            return AttemptVerdict(durable: durable, next: .fail(input, keepResponse: nil))
        }
    }
}
