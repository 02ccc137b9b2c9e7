#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One blocking JSON-RPC connection to halftunesd over its Unix socket.
///
/// Not thread-safe for concurrent calls: serialize them externally (`HalfTunesClient` does).
/// `close()` may be called from any thread and unblocks a thread waiting in `nextNotification()`.
public final class HalfTunesConnection: @unchecked Sendable {
    public let socketPath: String
    /// Seconds a call waits for its response before throwing `.timedOut`; nil waits forever.
    public var callTimeout: Double?

    private let socket: LineSocket
    private var nextID: Int64 = 1
    /// Raw notification lines that arrived while a call waited for its response.
    private var queuedNotifications: [[UInt8]] = []
    private var queueHead = 0

    public init(socketPath: String = DefaultSocket.path(), callTimeout: Double? = nil) throws {
        self.socketPath = socketPath
        self.callTimeout = callTimeout
        if let problem = DefaultSocket.trustProblem(socketPath) {
            throw HalfTunesClientError.untrustedSocket(socketPath: socketPath, problem: problem)
        }
        self.socket = try LineSocket.connect(path: socketPath)
        if let problem = DefaultSocket.peerProblem(socketPath, peer: socket.peerUID()) {
            throw HalfTunesClientError.untrustedSocket(socketPath: socketPath, problem: problem)
        }
    }

    deinit { socket.shutdown() }

    public func call<P: Encodable, R: Decodable>(_ method: RPCMethod, _ params: P, as: R.Type) throws -> R {
        try perform(method.rawValue, params: params, as: R.self)
    }

    /// A call whose method takes no params (`params` is omitted from the request).
    public func call<R: Decodable>(_ method: RPCMethod, as: R.Type) throws -> R {
        try perform(method.rawValue, params: JSONValue?.none, as: R.self)
    }

    /// Any method by name, untyped.
    public func callRaw(_ method: String, params: JSONValue?) throws -> JSONValue {
        try perform(method, params: params, as: JSONValue.self)
    }

    /// The next server notification; blocks; nil at end of stream or after `close()`.
    /// Notifications that arrived while a call waited for its response come first, in order.
    public func nextNotification() throws -> RPCNotification? {
        guard let line = try nextNotificationLine() else { return nil }
        do {
            return try WireCoding.decoder.decode(RPCNotification.self, from: Data(line))
        } catch {
            throw HalfTunesClientError.protocolViolation("malformed notification: \(excerpt(line))")
        }
    }

    /// What `nextNotification(timeout:)` found.
    public enum Waited: Sendable {
        case notification(RPCNotification)
        /// None came within the time (the connection is as it was: wait again, or call).
        case timedOut
        /// End of stream, or `close()`.
        case closed
    }

    /// The next server notification, waiting at most `timeout` seconds (a client that must also do other work on
    /// the same connection, like an agent polling the units it started between launch requests).
    public func nextNotification(timeout: Double) throws -> Waited {
        let line: [UInt8]?
        do {
            line = try nextNotificationLine(deadline: monotonicNow() + max(0, timeout))
        } catch is LineSocket.Timeout {
            return .timedOut
        }
        guard let line else { return .closed }
        do {
            return .notification(try WireCoding.decoder.decode(RPCNotification.self, from: Data(line)))
        } catch {
            throw HalfTunesClientError.protocolViolation("malformed notification: \(excerpt(line))")
        }
    }

    /// Whether the connection is no longer usable: closed here, or by the daemon (which drops clients
    /// that stay silent past its client timeout). Nothing was sent on it that is still unanswered.
    public var isClosed: Bool { socket.wasShutDown || socket.peerHasClosed }

    /// Ends the connection (shutdown(2)): blocked readers return nil, later calls throw `.connectionClosed`.
    public func close() { socket.shutdown() }

    // MARK: - Internals

    /// The raw line of the next notification (queued ones first); responses to earlier calls are skipped.
    func nextNotificationLine(deadline: Double? = nil) throws -> [UInt8]? {
        if queueHead < queuedNotifications.count {
            let line = queuedNotifications[queueHead]
            queueHead += 1
            if queueHead == queuedNotifications.count {
                queuedNotifications.removeAll(keepingCapacity: true)
                queueHead = 0
            }
            return line
        }
        while true {
            guard let line = try socket.readLine(deadline: deadline) else { return nil }
            if line.isEmpty { continue }
            if try isNotification(line) { return line }
        }
    }

    /// Notifications carry "method"; responses (late answers to calls that timed out) never do.
    private func isNotification(_ line: [UInt8]) throws -> Bool {
        do {
            return try WireCoding.decoder.decode(IncomingEnvelope<JSONValue>.self, from: Data(line)).method != nil
        } catch {
            throw HalfTunesClientError.protocolViolation("not a JSON-RPC message: \(excerpt(line))")
        }
    }

    private func perform<P: Encodable, R: Decodable>(_ method: String, params: P?, as: R.Type) throws -> R {
        let id = nextID
        nextID += 1
        let request: [UInt8]
        do {
            request = try WireCoding.line(OutgoingRequest(id: id, method: method, params: params))
        } catch {
            throw HalfTunesClientError.protocolViolation("cannot encode params of \(method): \(error)")
        }
        try socket.write(request)
        let deadline = callTimeout.map { monotonicNow() + $0 }
        while true {
            let line: [UInt8]?
            do {
                line = try socket.readLine(deadline: deadline)
            } catch is LineSocket.Timeout {
                throw HalfTunesClientError.timedOut(method: method, seconds: callTimeout ?? 0)
            }
            guard let line else { throw HalfTunesClientError.connectionClosed }
            if line.isEmpty { continue }
            let envelope: IncomingEnvelope<R>
            do {
                envelope = try WireCoding.decoder.decode(IncomingEnvelope<R>.self, from: Data(line))
            } catch {
                throw HalfTunesClientError.protocolViolation("not a JSON-RPC message: \(excerpt(line))")
            }
            if envelope.method != nil {
                queuedNotifications.append(line)
                continue
            }
            switch envelope.id {
            case .int(id)?:
                if let error = envelope.error { throw HalfTunesClientError.rpc(error) }
                if let result = envelope.result { return result }
                if let resultError = envelope.resultError {
                    throw HalfTunesClientError.protocolViolation(
                        "unexpected result for \(method) (\(resultError)): \(excerpt(line))")
                }
                throw HalfTunesClientError.protocolViolation("response to \(method) has neither result nor error")
            case nil:
                // The daemon could not read our request's id: the error is about this request.
                if let error = envelope.error { throw HalfTunesClientError.rpc(error) }
                throw HalfTunesClientError.protocolViolation("response without id: \(excerpt(line))")
            case .int(let other)? where other < id:
                continue // a late answer to an earlier call that timed out
            case let other?:
                throw HalfTunesClientError.protocolViolation("response for unknown request id \(other)")
            }
        }
    }
}
