import Foundation
import HalfTunesKit
import HalfTunesProtocol

/// Polls `body` until it returns a value (a condition wait with a deadline, not a timing guess). Other
/// errors are retried; a `TestFailure` from `body` means the wait is hopeless and ends it at once.
@discardableResult
func eventually<T>(_ what: String, timeout: Double = 60, _ body: () throws -> T?) throws -> T {
    let deadline = Date().addingTimeInterval(timeout)
    var lastError: Error?
    while Date() < deadline {
        do {
            if let value = try body() { return value }
        } catch let failure as TestFailure {
            throw failure
        } catch {
            lastError = error
        }
        usleep(10_000)
    }
    throw TestFailure("timed out after \(timeout) s waiting for \(what)" + (lastError.map { " (last error: \($0))" } ?? ""))
}

extension HalfTunesClient {
    /// Waits until the task reaches `state` (fails early if it ends in another terminal state).
    @discardableResult
    func waitFor(task id: Int64, state: TaskState, timeout: Double = 60) throws -> TaskInfo {
        try eventually("task \(id) to be \(state.rawValue)", timeout: timeout) {
            let info = try self.task(id)
            if info.state == state { return info }
            if info.state.isTerminal {
                throw TestFailure("task \(id) ended \(info.state.rawValue) instead of \(state.rawValue): \(info.error?.message ?? "")")
            }
            return nil
        }
    }
}

/// Collects events from a subscription on a background reader, so tests can wait for a predicate.
final class EventRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [Event] = []
    private var ended = false
    private let stream: EventStream
    private var reader: Thread?

    init(client: HalfTunesClient, session: String, after: Int64) throws {
        stream = try client.events(session: session, after: after)
        let t = Thread { [weak self] in self?.readLoop() }
        reader = t
        t.start()
    }

    private func readLoop() {
        while true {
            let next: Event?
            do { next = try stream.nextEvent() } catch { next = nil }
            lock.lock()
            if let next { events.append(next) } else { ended = true }
            lock.unlock()
            if next == nil { return }
        }
    }

    var all: [Event] {
        lock.lock(); defer { lock.unlock() }
        return events
    }

    var hasEnded: Bool {
        lock.lock(); defer { lock.unlock() }
        return ended
    }

    /// Waits until an event matching `predicate` has arrived; returns it.
    @discardableResult
    func wait(for what: String, timeout: Double = 60, _ predicate: @escaping (Event) -> Bool) throws -> Event {
        try eventually(what, timeout: timeout) { all.first(where: predicate) }
    }

    func close() { stream.close() }
    deinit { stream.close() }
}

extension Event {
    var isDidComplete: Bool { if case .didComplete = payload { return true } else { return false } }
    var isDidFinishEvents: Bool { if case .didFinishEvents = payload { return true } else { return false } }
    var finishedLocation: String? { if case .didFinishDownloading(let l) = payload { return l } else { return nil } }
    var completionError: TaskError?? { if case .didComplete(let e, _) = payload { return .some(e) } else { return nil } }
}
