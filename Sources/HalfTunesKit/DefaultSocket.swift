#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the daemon's control socket is. The daemon uses the same rules.
public enum DefaultSocket {
    /// The socket file name inside the runtime directory.
    public static let fileName = "control.sock"

    /// `HALFTUNES_SOCKET` if set; for root `/run/halftunesd/control.sock`; otherwise
    /// `$XDG_RUNTIME_DIR/halftunesd/control.sock`, or `/tmp/halftunesd-<uid>/control.sock` when
    /// `XDG_RUNTIME_DIR` is unset.
    public static func path() -> String {
        path(socketOverride: env("HALFTUNES_SOCKET"), runtimeDirectory: env("XDG_RUNTIME_DIR"), uid: getuid())
    }

    /// The same rules with explicit inputs (empty strings count as unset).
    public static func path(socketOverride: String?, runtimeDirectory: String?, uid: UInt32) -> String {
        if let socketOverride, !socketOverride.isEmpty { return socketOverride }
        if uid == 0 { return "/run/halftunesd/\(fileName)" }
        if let runtimeDirectory, !runtimeDirectory.isEmpty {
            let base = runtimeDirectory.hasSuffix("/") ? String(runtimeDirectory.dropLast()) : runtimeDirectory
            return "\(base)/halftunesd/\(fileName)"
        }
        return "/tmp/halftunesd-\(uid)/\(fileName)"
    }

    private static func env(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        return String(cString: value)
    }
}
