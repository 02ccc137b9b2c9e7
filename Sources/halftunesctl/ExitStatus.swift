import ArgumentParser
import HalfTunesKit

/// halftunesctl's exit codes (documented in docs/cli.md).
enum ExitStatus {
    static let ok: Int32 = 0
    /// The operation failed, or the task failed (`download --wait`).
    static let failure: Int32 = 1
    /// Bad command line.
    static let usage: Int32 = 2
    /// No such task or session.
    static let unknown: Int32 = 3
    /// The task was canceled (`download --wait`).
    static let canceled: Int32 = 4
    /// The task's state does not allow the change.
    static let illegalState: Int32 = 5
    /// The daemon refused for good (`agent`: the daemon's own user, which needs no agent; EX_NOPERM).
    static let notPermitted: Int32 = 77
    /// The daemon is not running (EX_UNAVAILABLE).
    static let daemonNotRunning: Int32 = 69

    static func code(for error: HalfTunesClientError) -> Int32 {
        switch error {
        case .daemonNotRunning: return daemonNotRunning
        case .untrustedSocket: return notPermitted
        case .rpc(let rpc):
            switch rpc.knownCode {
            case .unknownTask?, .unknownSession?: return unknown
            case .illegalStateChange?: return illegalState
            case .invalidParams?: return usage
            default: return failure
            }
        default: return failure
        }
    }
}
