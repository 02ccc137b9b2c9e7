#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Everything a HalfTunesKit call can throw.
public enum HalfTunesClientError: Error, CustomStringConvertible, Equatable {
    /// Nothing listens on the socket (ENOENT or ECONNREFUSED on connect).
    case daemonNotRunning(socketPath: String)
    /// The daemon answered with a JSON-RPC error (see `RPCError.knownCode`).
    case rpc(RPCError)
    /// The daemon sent something that is not valid JSON-RPC for this protocol.
    case protocolViolation(String)
    /// A system call failed; `errno` tells why.
    case io(String, errno: Int32)
    /// The connection was closed (by the daemon, or by `close()`) while a call was waiting.
    case connectionClosed
    /// The daemon did not answer a call within the connection's `callTimeout`.
    case timedOut(method: String, seconds: Double)
    /// The default socket's directory could be another user's (`DefaultSocket.trustProblem`): not connected.
    case untrustedSocket(socketPath: String, problem: String)

    public var description: String {
        switch self {
        case .daemonNotRunning(let path):
            return "halftunesd is not running (nothing listening on \(path)). "
                + "Start it with `make run`, `halftunesd`, or `systemctl start halftunesd`."
        case .rpc(let error):
            return error.message
        case .protocolViolation(let detail):
            return "halftunesd protocol violation: \(detail)"
        case .io(let what, let code):
            return "\(what): \(String(cString: strerror(code)))"
        case .connectionClosed:
            return "halftunesd closed the connection"
        case .timedOut(let method, let seconds):
            return "halftunesd did not answer \(method) within \(Formatting.duration(seconds))"
        case .untrustedSocket(let path, let problem):
            return "not connecting to \(path): \(problem). Remove it (halftunesd makes it again), or name a socket "
                + "with --socket or HALFTUNES_SOCKET"
        }
    }

    /// The RPC error code, when this is an `.rpc` error with a code this version knows.
    public var rpcCode: RPCErrorCode? {
        if case .rpc(let error) = self { return error.knownCode }
        return nil
    }
}
