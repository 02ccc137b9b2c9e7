/// Typed access to every halftunesd method over one connection. Calls from several threads are
/// serialized; `events(session:after:)` opens a dedicated connection per subscription.
public final class HalfTunesClient: @unchecked Sendable {
    public let socketPath: String
    /// Applied to every call (see `HalfTunesConnection.callTimeout`).
    public let callTimeout: Double?

    private var connection: HalfTunesConnection
    private var closedByUser = false
    private let lock = Lock()

    public init(socketPath: String = DefaultSocket.path(), callTimeout: Double? = nil) throws {
        self.socketPath = socketPath
        self.callTimeout = callTimeout
        self.connection = try HalfTunesConnection(socketPath: socketPath, callTimeout: callTimeout)
    }

    public func close() {
        lock.withLock {
            closedByUser = true
            connection.close()
        }
    }

    public func status() throws -> DaemonStatus {
        try lock.withLock { try usableConnection().call(.daemonStatus, as: DaemonStatus.self) }
    }

    /// Creates the session, or re-attaches to it when it exists (`reattached`). A configuration, when
    /// given, replaces the stored one.
    public func openSession(_ identifier: String, configuration: SessionConfiguration? = nil) throws -> SessionOpenResult {
        try call(.sessionOpen, SessionOpenParams(identifier: identifier, configuration: configuration))
    }

    public func sessions() throws -> [SessionInfo] {
        try lock.withLock { try usableConnection().call(.sessionList, as: SessionListResult.self) }.sessions
    }

    /// The session named `identifier`; throws `.rpc` with `unknownSession` when there is none.
    public func session(_ identifier: String) throws -> SessionInfo {
        guard let info = try sessions().first(where: { $0.identifier == identifier }) else {
            throw HalfTunesClientError.rpc(.unknownSession(identifier))
        }
        return info
    }

    /// `cancelTasks: false` is `finishTasksAndInvalidate()`, `true` is `invalidateAndCancel()`.
    public func invalidateSession(_ identifier: String, cancelTasks: Bool) throws -> SessionInvalidateResult {
        try call(.sessionInvalidate, SessionInvalidateParams(identifier: identifier, cancelTasks: cancelTasks))
    }

    public func createTask(_ params: TaskCreateParams) throws -> TaskInfo {
        try call(.taskCreate, params)
    }

    public func resume(_ id: Int64) throws -> TaskInfo { try call(.taskResume, TaskIDParams(id: id)) }

    public func suspend(_ id: Int64) throws -> TaskInfo { try call(.taskSuspend, TaskIDParams(id: id)) }

    public func cancel(_ id: Int64, produceResumeData: Bool = false) throws -> TaskCancelResult {
        try call(.taskCancel, TaskCancelParams(id: id, produceResumeData: produceResumeData))
    }

    public func task(_ id: Int64) throws -> TaskInfo { try call(.taskGet, TaskIDParams(id: id)) }

    /// Every task (of `session`, in `state`), by id: follows `task.list`'s pages to the end.
    public func tasks(session: String? = nil, state: TaskState? = nil) throws -> [TaskInfo] {
        var all: [TaskInfo] = []
        var cursor: String?
        repeat {
            let page = try taskPage(session: session, state: state, cursor: cursor)
            all += page.tasks
            cursor = page.nextCursor
        } while cursor != nil
        return all
    }

    /// One page of `task.list`: up to `limit` tasks (at most 1,000) after `cursor` (a previous `nextCursor`).
    public func taskPage(session: String? = nil, state: TaskState? = nil, limit: Int? = nil,
                         cursor: String? = nil) throws -> TaskListResult {
        try call(.taskList, TaskListParams(session: session, state: state, limit: limit, cursor: cursor))
    }

    /// Acknowledges (and lets the daemon prune) the session's journaled events up to `through`.
    public func ack(session: String, through: Int64) throws -> EventsAckResult {
        try call(.eventsAck, EventsAckParams(session: session, through: through))
    }

    /// Subscribes on a dedicated connection: replayed events with seq > `after`, a `didFinishEvents`
    /// event, then live events. Close the stream (or end its iteration) to unsubscribe.
    public func events(session: String, after: Int64 = 0) throws -> EventStream {
        let subscriber = try HalfTunesConnection(socketPath: socketPath, callTimeout: callTimeout)
        do {
            let result = try subscriber.call(.eventsSubscribe, EventsSubscribeParams(session: session, after: after),
                                             as: EventsSubscribeResult.self)
            subscriber.callTimeout = nil
            return EventStream(connection: subscriber, session: session, subscription: result)
        } catch {
            subscriber.close()
            throw error
        }
    }

    /// Any method by name with untyped params (`halftunesctl call`): for methods this version does not
    /// wrap, and for scripts.
    public func callRaw(_ method: String, params: JSONValue?) throws -> JSONValue {
        try lock.withLock { try usableConnection().callRaw(method, params: params) }
    }

    func call<P: Encodable, R: Decodable>(_ method: RPCMethod, _ params: P) throws -> R {
        try lock.withLock { try usableConnection().call(method, params, as: R.self) }
    }

    /// The connection, replaced by a new one when the daemon closed it while it was idle (the
    /// daemon drops connections that send nothing for its client timeout, and restarts may happen).
    /// Only a connection with no request in flight is replaced, so no call is ever sent twice.
    private func usableConnection() throws -> HalfTunesConnection {
        if !closedByUser, connection.isClosed {
            connection = try HalfTunesConnection(socketPath: socketPath, callTimeout: callTimeout)
        }
        return connection
    }
}
