// Reaching download directories without following links someone else can change: openat, one component at a time.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
import Darwin
#endif
import HalfTunesProtocol

/// Every operation on a partial file or a destination goes through a descriptor of its directory opened here,
/// then `openat`/`linkat`/`unlinkat`/`renameat` with the bare name: a user who swaps a directory on the way
/// for a symlink after the task was created cannot redirect the daemon's writes. A path is walked from `/`
/// with `O_NOFOLLOW`; a symbolic link is followed only when it belongs to root or to the daemon's own user
/// (system links such as `/var/run`, a user-mode daemon's own `~/Downloads` link), never one another user
/// could have made.
public enum SafePath {
    /// Opens the directory `path` (absolute) for use with the *at calls. The caller closes the descriptor.
    public static func openDirectory(_ path: String) throws -> Int32 {
        guard path.hasPrefix("/") else { throw FileIOError(operation: "use a relative directory", path: path, errno: EINVAL) }
        var fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw FileIOError(operation: "open directory", path: "/", errno: errno) }
        var reached = ""
        for name in PathBytes.components(path) where name != "." {
            // Paths come here normalized; a `..` left in one (a split that missed a `/`) is refused, not followed.
            guard name != ".." else { close(fd); throw FileIOError(operation: "open a path with '..' in it", path: path, errno: EINVAL) }
            reached += "/" + name
            var next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if next < 0 {
                let e = errno
                var st = stat()
                if (e == ELOOP || e == ENOTDIR), fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0,
                   (st.st_mode & S_IFMT) == S_IFLNK {
                    guard st.st_uid == 0 || st.st_uid == geteuid() else {
                        close(fd)
                        throw FileIOError(operation: "go through \(reached), a symbolic link of uid \(st.st_uid) (downloads never go "
                            + "through links someone else can change; name the real directory)", path: path, errno: ELOOP)
                    }
                    next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                } else {
                    close(fd)
                    throw FileIOError(operation: "open directory", path: reached, errno: e)
                }
            }
            let e = errno
            close(fd)
            guard next >= 0 else { throw FileIOError(operation: "open directory", path: reached, errno: e) }
            fd = next
        }
        return fd
    }

    /// Runs `body` with a descriptor of `path`'s directory and `path`'s last component.
    public static func inParent<T>(of path: String, _ body: (_ directory: Int32, _ name: String) throws -> T) throws -> T {
        let (directory, name) = try split(path)
        let fd: Int32
        do {
            fd = try openDirectory(directory)
        } catch let e as FileIOError {
            // Name the file the caller asked for ("Cannot open '/dir/missing/x': No such file or directory").
            throw FileIOError(operation: e.operation == "open directory" ? "open" : e.operation, path: path, errno: e.errno)
        }
        defer { close(fd) }
        return try body(fd, name)
    }

    /// A file path's directory and last component (which must be a name, not "." or "..").
    static func split(_ path: String) throws -> (directory: String, name: String) {
        guard let (before, name) = PathBytes.splitLast(path), !name.isEmpty else {
            throw FileIOError(operation: "use as a file path", path: path, errno: EINVAL)
        }
        let directory = before.isEmpty ? "/" : before
        guard name != ".", name != ".." else { throw FileIOError(operation: "use as a file path", path: path, errno: EINVAL) }
        return (directory, name)
    }

    /// Makes the directory `path` (its parent reached safely) unless it exists; a new one is given to `owner`
    /// (uid, gid) without following a link, even one swapped in right after it was made. Returns whether it
    /// was made.
    @discardableResult
    public static func makeDirectory(_ path: String, mode: mode_t, owner: (uid: uid_t, gid: gid_t)? = nil) throws -> Bool {
        try inParent(of: path) { dir, name in
            guard mkdirat(dir, name, mode) == 0 else {
                if errno == EEXIST { return false }
                throw FileIOError(operation: "create directory", path: path, errno: errno)
            }
            if let owner, fchownat(dir, name, owner.uid, owner.gid, AT_SYMLINK_NOFOLLOW) != 0 {
                throw FileIOError(operation: "give to uid \(owner.uid) the directory", path: path, errno: errno)
            }
            return true
        }
    }

    /// renameat between two safely reached directories: 0, or the errno of the rename.
    public static func rename(_ source: String, to target: String) throws -> Int32 {
        try inParent(of: source) { fromDir, fromName in
            try inParent(of: target) { toDir, toName in renameat(fromDir, fromName, toDir, toName) == 0 ? 0 : errno }
        }
    }

    /// lstat through the safe walk; nil when the path (or the way to it) does not exist or is refused.
    public static func lstatSafely(_ path: String) -> stat? {
        try? inParent(of: path) { dir, name -> stat? in
            var st = stat()
            return fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st : nil
        }
    }
}
