/// Stable JSON-RPC error codes. The standard ones are from JSON-RPC 2.0; the others are halftunesd's.
public enum RPCErrorCode: Int, Sendable, CaseIterable, Codable {
    case parseError = -32700
    case invalidRequest = -32600
    case methodNotFound = -32601
    case invalidParams = -32602
    case internalError = -32603

    /// No session with that identifier (or not yours).
    case unknownSession = -32001
    /// No task with that id (or not yours).
    case unknownTask = -32002
    /// The task's state does not allow that change (e.g. resuming a completed task).
    case illegalStateChange = -32003
    /// The session is being invalidated and accepts no new tasks.
    case sessionInvalidated = -32004
    /// The destination already exists, or another task already writes to it.
    case destinationConflict = -32005
    /// Resume data that is malformed, unknown to this daemon or already used.
    case invalidResumeData = -32006
    /// The daemon is shutting down.
    case shuttingDown = -32007
    /// A file or directory operation failed (permissions, missing directory, full disk, ...).
    case ioError = -32008
    /// A resource cap was reached (connections per uid, subscriptions per connection, tasks per session,
    /// unacknowledged events per session); the message names the cap and what frees it.
    case limitExceeded = -32009
    /// The caller may not do this at all (e.g. change the daemon-wide limits without being root or the
    /// daemon's own user).
    case permissionDenied = -32010

    public var name: String {
        switch self {
        case .parseError: return "parseError"
        case .invalidRequest: return "invalidRequest"
        case .methodNotFound: return "methodNotFound"
        case .invalidParams: return "invalidParams"
        case .internalError: return "internalError"
        case .unknownSession: return "unknownSession"
        case .unknownTask: return "unknownTask"
        case .illegalStateChange: return "illegalStateChange"
        case .sessionInvalidated: return "sessionInvalidated"
        case .destinationConflict: return "destinationConflict"
        case .invalidResumeData: return "invalidResumeData"
        case .shuttingDown: return "shuttingDown"
        case .ioError: return "ioError"
        case .limitExceeded: return "limitExceeded"
        case .permissionDenied: return "permissionDenied"
        }
    }
}

public extension RPCError {
    static func parse(_ detail: String) -> RPCError { .init(.parseError, "Parse error: \(detail)") }
    static func invalidRequest(_ detail: String) -> RPCError { .init(.invalidRequest, "Invalid request: \(detail)") }
    static func methodNotFound(_ method: String) -> RPCError {
        .init(.methodNotFound, "Unknown method '\(method)'; see docs/protocol.md for the method list")
    }
    static func invalidParams(_ detail: String) -> RPCError { .init(.invalidParams, "Invalid params: \(detail)") }
    static func unknownSession(_ id: String) -> RPCError { .init(.unknownSession, "No session with identifier '\(id)'") }
    /// The same words for a task that never existed, another user's, and one deleted after it finished, so
    /// that nothing is revealed about the others.
    static func unknownTask(_ id: Int64) -> RPCError {
        .init(.unknownTask, "No task with id \(id) (another user's tasks are not shown, and a finished task is deleted "
            + "once its events are acknowledged and its session's finishedTaskRetention has passed, 24 h by default)")
    }
    static func illegalStateChange(task: Int64, from state: TaskState, action: String) -> RPCError {
        .init(.illegalStateChange, "Cannot \(action) task \(task): it is \(state.rawValue)",
              data: .object(["task": .int(task), "state": .string(state.rawValue)]))
    }
}
