/// A value one service produces as it starts and the next one waits for. `ServiceGroup` starts its services
/// together and shuts them down one by one in reverse order; handoffs order the start-up the same way
/// (core → control server → supervisor) so that nothing is served before the journal is replayed.
final class StartupHandoff<Value: Sendable>: Sendable {
    private let stream: AsyncStream<Value>
    private let continuation: AsyncStream<Value>.Continuation

    init() {
        (stream, continuation) = AsyncStream.makeStream(of: Value.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Hands the value over (once).
    func provide(_ value: Value) {
        continuation.yield(value)
        continuation.finish()
    }

    /// The producer could not start: the waiter gets nil.
    func abandon() {
        continuation.finish()
    }

    /// The value, or nil when the producer gave up or the waiting task was cancelled. One waiter only.
    func value() async -> Value? {
        for await value in stream { return value }
        return nil
    }
}
