import Foundation

/// The outcome of one submitted write, awaited by whoever must answer for it (a `task.create` answers once its
/// rows are written, or fails): resolved once, on the writer's thread; awaiting never blocks a thread.
public final class WriteOutcome: @unchecked Sendable { // every field is behind `lock`
    private let lock = NSLock()
    private var outcome: String??
    private var waiters: [CheckedContinuation<String?, Never>] = []

    init() {}

    /// nil once the write is written; its error's description if it failed.
    public var failure: String? {
        get async {
            await withCheckedContinuation { continuation in
                lock.lock()
                if let outcome {
                    lock.unlock()
                    continuation.resume(returning: outcome)
                } else {
                    waiters.append(continuation)
                    lock.unlock()
                }
            }
        }
    }

    func resolve(_ error: Error?) {
        lock.lock()
        guard outcome == nil else { return lock.unlock() }
        let failure = error.map { "\($0)" }
        outcome = .some(failure)
        let waiting = waiters
        waiters = []
        lock.unlock()
        for waiter in waiting { waiter.resume(returning: failure) }
    }
}
