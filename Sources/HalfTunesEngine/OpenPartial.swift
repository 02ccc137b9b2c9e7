// A complete partial file held open from its verification to its publish: every step goes through this descriptor.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
import Darwin
#endif
import HalfTunesCore

/// The partial file of a download whose bytes are all durable, opened once (`O_NOFOLLOW`, through `SafePath`)
/// and checked to be the daemon's own file: a regular file, owned by the daemon's uid, with one link. Its
/// checksum is read from this descriptor, its metadata set on it (`fsetxattr`, `futimens`), it is fsynced
/// through it, and it is published by linking this very inode (`/proc/self/fd`). Before the publish, the path's
/// `(st_dev, st_ino)` must still be this descriptor's (`checkStillAtPath`): a user who swapped the partial for
/// a symlink, a hard link or another file makes the task fail with a clear error, and nothing else is touched.
/// The descriptor is closed when the last reference goes.
public final class OpenPartial: Sendable {
    public let fd: Int32
    public let path: String
    public let device: UInt64
    public let inode: UInt64

    private init(fd: Int32, path: String, device: UInt64, inode: UInt64) {
        self.fd = fd
        self.path = path
        self.device = device
        self.inode = inode
    }

    deinit { close(fd) }

    /// Opens the partial at `path` (read-only; no symlink followed, at the file or on the way) and checks it is
    /// the daemon's own file.
    public static func open(_ path: String) throws(FileIOError) -> OpenPartial {
        let fd: Int32
        do {
            fd = try SafePath.inParent(of: path) { dir, name in
                let fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
                guard fd >= 0 else {
                    let e = errno
                    if e == ELOOP {
                        throw FileIOError(operation: "use as a partial file (it is a symbolic link now; something replaced it)",
                                          path: path, errno: e)
                    }
                    throw FileIOError(operation: "open", path: path, errno: e)
                }
                return fd
            }
        } catch let error as FileIOError {
            throw error
        } catch {
            throw FileIOError(operation: "open", path: path, errno: EIO)
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let e = errno
            close(fd)
            throw FileIOError(operation: "stat", path: path, errno: e)
        }
        if let problem = Self.problem(with: st) {
            close(fd)
            throw FileIOError(operation: "use as a partial file (\(problem); something replaced it)", path: path, errno: EPERM)
        }
        return OpenPartial(fd: fd, path: path, device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    /// Why a file is not a partial the daemon made, or nil.
    static func problem(with st: stat) -> String? {
        if (st.st_mode & S_IFMT) != S_IFREG { return "not a regular file" }
        if st.st_nlink != 1 { return "it has \(st.st_nlink) hard links" }
        if st.st_uid != geteuid() { return "owned by uid \(st.st_uid), not the daemon" }
        return nil
    }

    /// Throws unless `path` still names this file, with one link: the last check before the publish.
    public func checkStillAtPath() throws(FileIOError) {
        guard let st = SafePath.lstatSafely(path) else {
            throw FileIOError(operation: "publish (the partial file is no longer at its path; something moved it)",
                              path: path, errno: ENOENT)
        }
        guard UInt64(st.st_dev) == device, UInt64(st.st_ino) == inode else {
            let what = (st.st_mode & S_IFMT) == S_IFLNK ? "a symbolic link" : "another file"
            throw FileIOError(operation: "publish (the partial file was replaced by \(what); nothing was published)",
                              path: path, errno: EPERM)
        }
        var own = stat()
        if fstat(fd, &own) == 0, own.st_nlink != 1 {
            throw FileIOError(operation: "publish (the partial file got \(own.st_nlink) hard links; something linked it)",
                              path: path, errno: EPERM)
        }
    }

    /// Whether the name `name` in the directory `dir` is this file (so removing the name removes nothing else).
    func isNamed(_ name: String, in dir: Int32) -> Bool {
        var st = stat()
        return fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && UInt64(st.st_dev) == device
            && UInt64(st.st_ino) == inode
    }

    public func fsync() throws(FileIOError) {
        guard Glibc.fsync(fd) == 0 else { throw FileIOError(operation: "fsync", path: path, errno: errno) }
    }

    /// The SHA-256 of the whole file, read through this descriptor. Blocks: run it off the daemon's actor.
    public func sha256() throws(FileIOError) -> Checksum {
        try Checksum.sha256(ofDescriptor: fd, path: path)
    }
}
