import Foundation

/// Test hook for crash-recovery tests: `HALFTUNES_CRASH_AT=<name>` makes the daemon kill itself with
/// SIGKILL when it reaches that point, so a test can crash it exactly between two steps of a
/// multi-step operation (e.g. after journaling a publish intent, before the link). Unset: no effect.
enum CrashPoints {
    static let armed = setting("HALFTUNES_CRASH_AT")

    /// Points in the completion sequence, in order.
    static let publishAfterIntent = "publish.afterIntent"
    static let publishAfterMove = "publish.afterMove"

    static func hit(_ name: String) {
        guard let armed, armed == name else { return }
        kill(getpid(), SIGKILL)
    }

    /// `HALFTUNES_CRASH_AT=trap:<text>` makes the daemon trap (a real Swift runtime trap, SIGILL or SIGTRAP, as a
    /// bug would) when a transfer of a URL containing `<text>` starts: how the tests prove that a crash does not
    /// repeat at every restart (`CrashRecord`).
    static let trapURL: String? = armed.flatMap { $0.hasPrefix("trap:") ? String($0.dropFirst(5)) : nil }

    static func trapIfArmed(url: String) {
        guard let trapURL, url.contains(trapURL) else { return }
        _ = Int64.max + Int64(url.utf8.count) // an overflow trap, like issue 54's (the count is known only now)
    }

    /// `HALFTUNES_STOP_AT=<name>` makes the daemon stop itself (SIGSTOP) at that point, so a test can send it a
    /// signal at an exact step (e.g. SIGTERM during start-up) and let it continue with SIGCONT. Unset: no effect.
    static let stopArmed = setting("HALFTUNES_STOP_AT")

    /// The journal replay is about to begin (nothing is served yet).
    static let recoverStart = "recover.start"
    /// A download's publish intent is journaled and its file is about to be moved (off the core).
    static let publishMoving = "publish.moving"

    static func stop(_ name: String) {
        guard let stopArmed, stopArmed == name else { return }
        kill(getpid(), SIGSTOP)
    }

    /// `HALFTUNES_HOLD_AT=<name>:<path>` makes the thread that reaches that point wait until `<path>` exists
    /// (the rest of the daemon keeps running), so a test can act while a step is in progress. Unset: no effect.
    static let holdArmed: (name: String, path: String)? = setting("HALFTUNES_HOLD_AT").flatMap { value in
        value.firstIndex(of: ":").map { (String(value[..<$0]), String(value[value.index(after: $0)...])) }
    }

    /// Blocks the calling thread (never the core's) while held.
    static func hold(_ name: String) {
        guard let holdArmed, holdArmed.name == name else { return }
        FileHandle.standardError.write(Data("halftunesd: held at \(name) until \(holdArmed.path) exists\n".utf8))
        while access(holdArmed.path, F_OK) != 0 { usleep(5_000) }
    }

    /// A test hook's variable, nil when unset or empty.
    private static func setting(_ name: String) -> String? {
        ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 }
    }
}
