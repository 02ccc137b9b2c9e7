#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import HalfTunesProtocol

/// Where the daemon's control socket is. The daemon uses the same rules.
public enum DefaultSocket {
    /// The socket file name inside the runtime directory.
    public static let fileName = "control.sock"

    /// The system service's socket.
    public static let systemPath = "/run/halftunesd/\(fileName)"

    /// `HALFTUNES_SOCKET` if set; for root `/run/halftunesd/control.sock`; otherwise
    /// `$XDG_RUNTIME_DIR/halftunesd/control.sock`, or `/tmp/halftunesd-<uid>/control.sock` when
    /// `XDG_RUNTIME_DIR` is unset. A user without a socket of their own, on a machine whose system
    /// service's socket exists, gets the system socket (members of its group may use it).
    public static func path() -> String {
        let own = path(socketOverride: env("HALFTUNES_SOCKET"), runtimeDirectory: env("XDG_RUNTIME_DIR"), uid: getuid())
        return resolve(own: own, overridden: !(env("HALFTUNES_SOCKET") ?? "").isEmpty, exists: socketExists)
    }

    /// `own` unless it was derived (not overridden), does not exist, and the system socket does.
    public static func resolve(own: String, overridden: Bool, exists: (String) -> Bool) -> String {
        if overridden || own == systemPath || exists(own) || !exists(systemPath) { return own }
        return systemPath
    }

    /// Why the client must not connect to `path`, or nil. A socket at a path derived from the environment (the
    /// user's own, or the system's) is used only in a directory its owner or root made and nobody else can write
    /// (`SocketDirectory`); one named explicitly (`HALFTUNES_SOCKET`, `--socket`) is used as named.
    public static func trustProblem(_ path: String, uid: UInt32 = getuid()) -> String? {
        guard isDerived(path, uid: uid) else { return nil }
        return SocketDirectory.problem(socketPath: path, uid: uid)
    }

    /// Why the client must not talk to the listener it connected to at `path` (`peer`: its uid, SO_PEERCRED), or
    /// nil. At a derived path the daemon is the user's own, root's or the system service's (user `halftunesd`):
    /// a listener of anyone else (who made the socket first in a sticky directory, say) is not talked to.
    public static func peerProblem(_ path: String, peer: UInt32?, uid: UInt32 = getuid()) -> String? {
        guard let peer, peer != uid, peer != 0, isDerived(path, uid: uid), peer != systemUserUID() else { return nil }
        return "it is served by uid \(peer), not by \(uid == 0 ? "" : "uid \(uid), ")root or the system service's user "
            + "\(systemUser) (another user may have made it to stand in for halftunesd)"
    }

    /// The system service's user (systemd/sysusers.d).
    public static let systemUser = "halftunesd"

    /// Whether the client derived `path` from the environment (the trust checks apply to those only).
    private static func isDerived(_ path: String, uid: UInt32) -> Bool {
        let derived = [systemPath, Self.path(socketOverride: nil, runtimeDirectory: env("XDG_RUNTIME_DIR"), uid: uid)]
        return derived.contains(path) && (env("HALFTUNES_SOCKET") ?? "").isEmpty
    }

    private static func systemUserUID() -> UInt32? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var size = 4096
        while size <= 1 << 20 {
            var buffer = [CChar](repeating: 0, count: size)
            let rc = getpwnam_r(systemUser, &entry, &buffer, buffer.count, &result)
            if rc == ERANGE { size *= 4; continue }
            return rc == 0 && result != nil ? entry.pw_uid : nil
        }
        return nil
    }

    private static func socketExists(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFSOCK
    }

    /// The same rules with explicit inputs (empty strings count as unset).
    public static func path(socketOverride: String?, runtimeDirectory: String?, uid: UInt32) -> String {
        if let socketOverride, !socketOverride.isEmpty { return socketOverride }
        if uid == 0 { return systemPath }
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
