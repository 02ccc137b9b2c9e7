// Whether a control socket's directory can be trusted: only its owner (or root) can have put a socket there.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

public enum SocketDirectory {
    /// Why the directory of `socketPath` cannot be trusted by `uid`, or nil: it must be a real directory (not a
    /// symbolic link) owned by `uid` or root, and not writable by group or others unless sticky (as /tmp: then
    /// nobody else can rename or remove what is in it). Another user who made `/tmp/halftunesd-<uid>` could
    /// otherwise listen there and receive the user's URLs and credentials. nil too when the directory does not
    /// exist (there is nothing to connect to, nor to take over).
    public static func problem(socketPath: String, uid: UInt32) -> String? {
        let dir = PathBytes.directory(of: socketPath)
        var st = stat()
        guard lstat(dir, &st) == 0 else { return nil }
        if (st.st_mode & S_IFMT) == S_IFLNK {
            return "\(dir) is a symbolic link (another user may have made it to stand in for halftunesd)"
        }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { return "\(dir) is not a directory" }
        if st.st_uid != uid && st.st_uid != 0 {
            return "\(dir) belongs to uid \(st.st_uid), not to \(uid == 0 ? "root" : "uid \(uid) or root") (another user "
                + "may have made it to stand in for halftunesd)"
        }
        if st.st_mode & 0o022 != 0 && st.st_mode & 0o1000 == 0 {
            return "\(dir) is writable by other users (mode \(String(st.st_mode & 0o7777, radix: 8)))"
        }
        return nil
    }
}
