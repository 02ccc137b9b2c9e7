import HalfTunesProtocol

/// The end of a download as a value type, from "every byte is durable" to completed or failed: verify the
/// expected checksum, choose a free name, record the intent, move the file into place, choose again when the
/// name was taken meanwhile. It takes inputs (the digest, the name chosen, how the move went) and returns the
/// actions the daemon carries out; no I/O. The file system work (digest, move) runs off the core.
///
/// Crash safety is in the order of the actions: `recordIntent` (the journal's `phase = publishing` with the
/// location, synced) always comes before `move`, and only after a successful verification; recovery finishes a
/// recorded intent with `recovered(_:)`.
public struct CompletionMachine: Sendable, Equatable {
    public enum State: Sendable, Equatable {
        /// The digest of the complete partial file is being computed.
        case verifying
        /// The daemon is choosing the name to publish at (`chooseName` was returned).
        case choosingName
        /// The intent is recorded and the file is being moved to `location`. Suspend and cancel wait for
        /// the outcome: a file half-way into place is never abandoned.
        case moving(location: String)
        /// `complete` or `fail` was returned.
        case finished
    }

    public enum Input: Sendable, Equatable {
        /// The digest of the partial file, or why it could not be read.
        case digestComputed(Result<Checksum, TaskError>)
        /// The free name the daemon chose (see `Action.chooseName`).
        case nameChosen(String)
        /// The daemon's bounded search found no free name near `near` (names planted to make it run on).
        case noFreeName(near: String)
        /// The move ended.
        case moveEnded(MoveOutcome)
    }

    public enum MoveOutcome: Sendable, Equatable {
        case published
        /// Someone created a file at the name between the choice and the move: choose again.
        case destinationExists
        case failed(String)
    }

    public enum Action: Sendable, Equatable {
        /// Compute the partial file's digest off the core and feed `digestComputed`.
        case computeDigest
        /// Choose a free name (not existing, not reserved by another task, not in `avoiding`) and feed
        /// `nameChosen`. `preferLocation` is false once a move found its name taken.
        case chooseName(avoiding: Set<String>)
        /// Journal `phase = publishing` with `location` and sync it before anything moves.
        case recordIntent(location: String)
        /// Move the partial file to `location` off the core and feed `moveEnded`.
        case move(location: String)
        /// Journal completion at `location` (`didFinishDownloading`, `didComplete`).
        case complete(location: String)
        /// Fail the task for good (non-transient); its partial data is discarded.
        case fail(TaskError)
    }

    /// How many times a name may be found taken at the move before the task fails.
    public static let maxNameAttempts = 5

    public private(set) var state: State
    /// The complete length.
    public let total: Int64
    /// Names found taken at the move, never chosen again.
    public private(set) var taken: Set<String> = []
    private let expected: Checksum?

    private init(state: State, total: Int64, expected: Checksum?) {
        self.state = state
        self.total = total
        self.expected = expected
    }

    /// The transfer delivered every byte. `checksum` is the task's expected checksum as journaled (nil: none).
    public static func transferCompleted(total: Int64, checksum: String?) -> (CompletionMachine, [Action]) {
        guard let text = checksum else {
            return (CompletionMachine(state: .choosingName, total: total, expected: nil), [.chooseName(avoiding: [])])
        }
        guard let expected = Checksum(parsing: text) else {
            // Refused at task.create; a journal written by hand could still hold one.
            let error = TaskError(code: TaskErrorCode.checksumMismatch,
                                  message: "The expected checksum '\(text)' cannot be read; the file was not published")
            return (CompletionMachine(state: .finished, total: total, expected: nil), [.fail(error)])
        }
        return (CompletionMachine(state: .verifying, total: total, expected: expected), [.computeDigest])
    }

    /// A publish whose intent was journaled before a crash (verification, if any, passed before the intent).
    /// `recovery` is what the file system shows now; `location` is the journaled one.
    public static func recovered(_ recovery: PublishRecovery, location: String, total: Int64)
        -> (CompletionMachine, [Action])
    {
        switch recovery {
        case .published:
            return (CompletionMachine(state: .finished, total: total, expected: nil), [.complete(location: location)])
        case .needsPublish, .conflict:
            return (CompletionMachine(state: .choosingName, total: total, expected: nil), [.chooseName(avoiding: [])])
        case .lost:
            let error = TaskError(code: TaskErrorCode.ioError,
                                  message: "The downloaded data disappeared while being moved to \(location)")
            return (CompletionMachine(state: .finished, total: total, expected: nil), [.fail(error)])
        }
    }

    /// True while the file is being moved (suspend and cancel wait for the outcome).
    public var isMoving: Bool {
        if case .moving = state { return true }
        return false
    }

    /// An input that does not fit the state (a stale result) changes nothing and returns no action.
    public mutating func handle(_ input: Input) -> [Action] {
        switch (state, input) {
        case (.verifying, .digestComputed(.failure(var error))):
            state = .finished
            error.message = "Cannot read the downloaded data to verify its checksum: \(error.message)"
            return [.fail(error)]
        case (.verifying, .digestComputed(.success(let actual))):
            guard let expected, actual == expected else {
                state = .finished
                return [.fail(TaskError(code: TaskErrorCode.checksumMismatch, message:
                    "The downloaded file's checksum is \(actual), not the expected \(expected?.description ?? "?"); "
                        + "the file was not published and its data was discarded"))]
            }
            state = .choosingName
            return [.chooseName(avoiding: taken)]

        case (.choosingName, .noFreeName(let near)):
            state = .finished
            return [.fail(TaskError(code: TaskErrorCode.destinationConflict, message:
                "No free name was found near \(near) to move the finished file to; move or remove some of the files "
                    + "named like it, then download again"))]
        case (.choosingName, .nameChosen(let location)):
            state = .moving(location: location)
            return [.recordIntent(location: location), .move(location: location)]

        case (.moving(let location), .moveEnded(.published)):
            state = .finished
            return [.complete(location: location)]
        case (.moving(let location), .moveEnded(.destinationExists)):
            taken.insert(location)
            guard taken.count < Self.maxNameAttempts else {
                state = .finished
                return [.fail(TaskError(code: TaskErrorCode.destinationConflict, message:
                    "Every free name near \(location) kept being taken while the finished file was moved into place"))]
            }
            state = .choosingName
            return [.chooseName(avoiding: taken)]
        case (.moving(let location), .moveEnded(.failed(let reason))):
            state = .finished
            return [.fail(TaskError(code: TaskErrorCode.ioError,
                                    message: "Could not move the file into place at \(location): \(reason)"))]

        default:
            return []
        }
    }
}

/// Where a publish interrupted by a crash stands (`FilePublisher.recover` finds it out): the file is at its
/// destination, still only the partial, both exist as different files, or neither does.
public enum PublishRecovery: Sendable, Equatable {
    case published, needsPublish, conflict, lost
}
