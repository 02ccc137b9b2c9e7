#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The events of one session subscription on a dedicated connection: journaled events after the
/// requested sequence number, then a `didFinishEvents` event, then live events.
///
/// Read it either synchronously with `nextEvent()` or with `for try await` (one iterator only); do not
/// mix the two. Ending the iteration, cancelling the iterating task, or `close()` closes the connection.
public final class EventStream: AsyncSequence, @unchecked Sendable {
    public typealias Element = Event
    public typealias AsyncIterator = AsyncThrowingStream<Event, any Error>.Iterator

    public let session: String
    /// The daemon's answer to the subscription (`prunedThrough` tells whether requested events were gone).
    public let subscription: EventsSubscribeResult

    private let connection: HalfTunesConnection
    private let lock = Lock()
    private var iteratorMade = false

    init(connection: HalfTunesConnection, session: String, subscription: EventsSubscribeResult) {
        self.connection = connection
        self.session = session
        self.subscription = subscription
    }

    deinit { connection.close() }

    /// The next event; blocks; nil when the daemon closes the connection or after `close()`.
    /// Events of types this version does not know are skipped.
    public func nextEvent() throws -> Event? {
        while true {
            guard let line = try connection.nextNotificationLine() else { return nil }
            let envelope: EventEnvelope
            do {
                envelope = try WireCoding.decoder.decode(EventEnvelope.self, from: Data(line))
            } catch {
                throw HalfTunesClientError.protocolViolation("malformed notification: \(excerpt(line))")
            }
            if let event = envelope.event { return event }
            guard envelope.method == HalfTunes.eventNotification, let error = envelope.eventError else { continue }
            if Self.hasUnknownType(line) { continue }
            throw HalfTunesClientError.protocolViolation("malformed event (\(error)): \(excerpt(line))")
        }
    }

    /// Closes the connection; a blocked `nextEvent()` returns nil and an async iteration ends.
    public func close() { connection.close() }

    public func makeAsyncIterator() -> AsyncIterator {
        let alreadyMade = lock.withLock { () -> Bool in
            defer { iteratorMade = true }
            return iteratorMade
        }
        let (stream, continuation) = AsyncThrowingStream<Event, any Error>.makeStream(bufferingPolicy: .unbounded)
        if alreadyMade {
            continuation.finish(throwing: HalfTunesClientError.protocolViolation(
                "an EventStream can be iterated only once"))
            return stream.makeAsyncIterator()
        }
        let connection = self.connection
        continuation.onTermination = { _ in connection.close() }
        BackgroundThread.start { [self] in
            do {
                while let event = try nextEvent() {
                    if case .terminated = continuation.yield(event) { break }
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        return stream.makeAsyncIterator()
    }

    private static func hasUnknownType(_ line: [UInt8]) -> Bool {
        let known: Set<String> = ["stateChanged", "didWriteData", "didResumeAtOffset", "didFinishDownloading",
                                  "didComplete", "didFinishEvents", "didBecomeInvalid"]
        guard let value = try? JSONParser.parse(line),
              case .string(let type)? = value["params"]?["type"] else { return false }
        return !known.contains(type)
    }
}
