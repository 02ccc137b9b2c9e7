// The origin's shared, lock-protected state: resources, behaviours, recorded requests, waiters, stalls.
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

struct StoredResource: Sendable {
    var body: ByteBuffer
    var etag: String
    var lastModified: String
}

struct OriginWaiter {
    enum Condition {
        case requests(count: Int)
        case bytes(atLeast: Int64)
    }
    var path: String
    var condition: Condition
    var continuation: CheckedContinuation<Void, Error>
}

struct OriginState {
    var resources: [String: StoredResource] = [:]
    var versions: [String: Int] = [:]
    var lastModifiedSeconds: [String: Int64] = [:]
    var behaviors: [String: TestOrigin.Behavior] = [:]
    var requests: [TestOrigin.RecordedRequest] = []
    var bytesByPath: [String: Int64] = [:]
    var waiters: [Int: OriginWaiter] = [:]
    var nextID = 0
    /// Connections accepted so far (each request records its connection's number, from 1).
    var connectionsAccepted = 0
    var stalls: [String: [Int: @Sendable () -> Void]] = [:]
    var channels: [ObjectIdentifier: any Channel] = [:]
    var isShutDown = false
    /// PUT/POST endpoints and the bodies they received (OriginUploads.swift).
    var uploads = OriginUploads()
    /// Resource bodies being sent now, and the most at once since the start (key "": every path).
    var sending: [String: Int] = [:]
    var mostSending: [String: Int] = [:]

    mutating func makeID() -> Int {
        nextID += 1
        return nextID
    }

    func isSatisfied(_ waiter: OriginWaiter) -> Bool {
        switch waiter.condition {
        case .requests(let count): return requests.lazy.filter { $0.path == waiter.path }.count >= count
        case .bytes(let atLeast): return bytesByPath[waiter.path, default: 0] >= atLeast
        }
    }

    /// Removes the waiters whose condition now holds; the caller resumes them outside the lock.
    mutating func takeSatisfiedWaiters(path: String) -> [CheckedContinuation<Void, Error>] {
        var ready: [CheckedContinuation<Void, Error>] = []
        for (id, waiter) in waiters where waiter.path == path && isSatisfied(waiter) {
            ready.append(waiter.continuation)
            waiters[id] = nil
        }
        return ready
    }
}

/// Shared core used by the public API and by every connection handler.
final class OriginCore: Sendable {
    let state = NIOLockedValueBox(OriginState())

    /// Runs `body` under the lock, then resumes the waiters of `path` that became satisfied.
    func mutate<T>(path: String?, _ body: (inout OriginState) -> T) -> T {
        let (result, ready) = state.withLockedValue { s -> (T, [CheckedContinuation<Void, Error>]) in
            let r = body(&s)
            return (r, path.map { s.takeSatisfiedWaiters(path: $0) } ?? [])
        }
        for c in ready { c.resume() }
        return result
    }

    func addBytes(request index: Int, _ count: Int64) {
        guard count > 0 else { return }
        let path = state.withLockedValue { $0.requests[index].path }
        mutate(path: path) { s in
            s.requests[index].bodyBytesSent += count
            s.bytesByPath[path, default: 0] += count
        }
    }

    func recordArrival(_ head: HTTPRequestHead, connection: Int) -> Int {
        let (index, ready) = state.withLockedValue { s -> (Int, [CheckedContinuation<Void, Error>]) in
            let index = s.recordArrival(head, connection: connection)
            return (index, s.takeSatisfiedWaiters(path: s.requests[index].path))
        }
        for c in ready { c.resume() }
        return index
    }

    /// A resource body began (or stopped) being sent for `path`.
    func sendingChanged(path: String, by delta: Int) {
        state.withLockedValue { s in
            for key in [path, ""] {
                let now = s.sending[key, default: 0] + delta
                s.sending[key] = now
                s.mostSending[key] = max(s.mostSending[key, default: 0], now)
            }
        }
    }

    func markTruncated(request index: Int) {
        state.withLockedValue { $0.requests[index].truncated = true }
    }

    func registerStall(path: String, release: @escaping @Sendable () -> Void) -> Int {
        state.withLockedValue { s in
            let id = s.makeID()
            s.stalls[path, default: [:]][id] = release
            return id
        }
    }

    func unregisterStall(path: String, id: Int) {
        state.withLockedValue { s in _ = s.stalls[path]?.removeValue(forKey: id) }
    }

    func releaseStalls(path: String) {
        let releases = state.withLockedValue { s -> [@Sendable () -> Void] in
            let r = s.stalls[path].map { Array($0.values) } ?? []
            s.stalls[path] = nil
            return r
        }
        for release in releases { release() }
    }

    func wait(path: String, _ condition: OriginWaiter.Condition, timeout: Duration, what: String) async throws {
        let id = state.withLockedValue { $0.makeID() }
        let timeoutTask = Task { [weak self] in
            try await Task.sleep(for: timeout)
            self?.timeOutWaiter(id, timeout: timeout, what: what)
        }
        defer { timeoutTask.cancel() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                let waiter = OriginWaiter(path: path, condition: condition, continuation: continuation)
                let result: Result<Void, Error>? = state.withLockedValue { s in
                    if s.isSatisfied(waiter) { return .success(()) }
                    if s.isShutDown {
                        return .failure(WaitError(description: "TestOrigin: shut down while waiting for \(what)"))
                    }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    s.waiters[id] = waiter
                    return nil
                }
                if let result { continuation.resume(with: result) }
            }
        } onCancel: {
            failWaiter(id, CancellationError())
        }
    }

    func timeOutWaiter(_ id: Int, timeout: Duration, what: String) {
        let waiter = state.withLockedValue { s -> (OriginWaiter, String)? in
            guard let w = s.waiters.removeValue(forKey: id) else { return nil }
            let requests = s.requests.lazy.filter { $0.path == w.path }.count
            let bytes = s.bytesByPath[w.path, default: 0]
            return (w, "\(requests) request(s) and \(bytes) body byte(s) so far for \(w.path)")
        }
        guard let (w, soFar) = waiter else { return }
        w.continuation.resume(throwing: WaitError(description: "TestOrigin: timed out after \(timeout) waiting for \(what); \(soFar)"))
    }

    func failWaiter(_ id: Int, _ error: Error) {
        let waiter = state.withLockedValue { $0.waiters.removeValue(forKey: id) }
        waiter?.continuation.resume(throwing: error)
    }
}

typealias WaitError = TestOrigin.WaitError
