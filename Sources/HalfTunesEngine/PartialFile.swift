// Partial files: create or reopen, cut back to the durable prefix, fsync; and the POSIX helpers around them.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
import Darwin
#endif
import HalfTunesProtocol

/// A failed file operation, with the path and errno.
public struct FileIOError: Error, Sendable, Equatable, CustomStringConvertible {
    public var operation: String
    public var path: String
    public var errno: Int32
    /// The task error code when it is not the errno's (`limitExceeded`: the uid's `max-disk-per-uid`).
    public var code: String?
    /// Said instead of the errno's words when set.
    public var reason: String?

    public init(operation: String, path: String, errno: Int32, code: String? = nil, reason: String? = nil) {
        self.operation = operation
        self.path = path
        self.errno = errno
        self.code = code
        self.reason = reason
    }

    public var description: String { "Cannot \(operation) '\(path)': \(reason ?? POSIX.describe(errno))" }

    /// `code` when set; otherwise diskFull (ENOSPC, EDQUOT), fileTooLarge (EFBIG), or ioError.
    public var taskError: TaskError {
        if let code { return TaskError(code: code, message: description) }
        let code: String
        switch errno {
        case ENOSPC, EDQUOT: code = TaskErrorCode.diskFull
        case EFBIG: code = TaskErrorCode.fileTooLarge
        default: code = TaskErrorCode.ioError
        }
        return TaskError(code: code, message: description)
    }

    /// A full disk or an over-large file may go away; other file errors will not by themselves.
    public var isTransient: Bool { errno == ENOSPC || errno == EDQUOT || errno == EFBIG }
}

public enum PartialFile {
    /// Create or open (O_CREAT|O_NOFOLLOW, 0644), truncate to min(current length, durableOffset), fsync;
    /// returns the length kept.
    public static func prepare(path: String, durableOffset: Int64) throws -> Int64 {
        let (fd, kept, _) = try openPrepared(path: path, durable: ByteRanges(prefix: durableOffset),
                                             deferNewFileSync: false)
        close(fd)
        return kept.count
    }

    /// unlink (through `SafePath`) if the name holds a file the daemon made (a regular file of the daemon's
    /// uid with one link, `OpenPartial.problem`): a symlink, a hard link or another user's file planted at the
    /// partial path is left as it is. Ignores ENOENT and a way to it that cannot be taken safely.
    public static func remove(path: String) {
        _ = try? SafePath.inParent(of: path) { dir, name -> Int32 in
            var st = stat()
            guard fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0, OpenPartial.problem(with: st) == nil else { return -1 }
            return unlinkat(dir, name, 0)
        }
    }

    /// The file's length, nil if it does not exist (symlinks are not followed, on the way either).
    public static func length(path: String) -> Int64? {
        SafePath.lstatSafely(path).map { Int64($0.st_size) }
    }

    /// Moves kept partial data to another partial path (resume data adopted by a new task): a regular file,
    /// renamed within the safely reached directories; false if that is not possible.
    public static func move(from source: String, to target: String) -> Bool {
        guard let st = SafePath.lstatSafely(source), (st.st_mode & S_IFMT) == S_IFREG else { return false }
        return (try? SafePath.rename(source, to: target)) == 0
    }

    /// `prepare`, keeping the descriptor open for writing (O_WRONLY, not O_APPEND). With `deferNewFileSync`, a
    /// file it creates is not fsynced, nor its directory: it is empty, so nothing in it can be lost, and the
    /// caller fsyncs the directory with the file's first data, before any length of it is journaled
    /// (`created` says so).
    /// The ranges kept are the durable ones the file still holds: the file is cut after the last of them (torn
    /// writes past it go; bytes between ranges stay, as they are not counted).
    static func openPrepared(path: String, durable: ByteRanges,
                             deferNewFileSync: Bool) throws -> (fd: Int32, kept: ByteRanges, created: Bool) {
        let (fd, created) = try POSIX.openForWriting(path)
        do {
            var st = stat()
            guard fstat(fd, &st) == 0 else { throw FileIOError(operation: "stat", path: path, errno: errno) }
            guard (st.st_mode & S_IFMT) == S_IFREG else {
                throw FileIOError(operation: "use as a partial file (not a regular file)", path: path, errno: EINVAL)
            }
            // Only a file the daemon made is written: a hard link planted at the partial path (to a file
            // elsewhere, even one the daemon owns) or a file someone else put there is refused before a
            // byte of it is cut or written.
            guard st.st_nlink == 1 else {
                throw FileIOError(operation: "use as a partial file (it has \(st.st_nlink) hard links; something replaced it)",
                                  path: path, errno: EPERM)
            }
            guard st.st_uid == geteuid() else {
                throw FileIOError(operation: "use as a partial file (owned by uid \(st.st_uid), not the daemon; something replaced it)",
                                  path: path, errno: EPERM)
            }
            let length = Int64(st.st_size)
            let kept = durable.clipped(to: length)
            // Always: at the same length it still frees blocks reserved past the end (`fallocate` with
            // FALLOC_FL_KEEP_SIZE) by a transfer that never gave them back (kill -9).
            guard ftruncate(fd, off_t(kept.upperBound)) == 0 else {
                throw FileIOError(operation: "truncate", path: path, errno: errno)
            }
            if created && deferNewFileSync { return (fd, kept, true) }
            guard fsync(fd) == 0 else { throw FileIOError(operation: "fsync", path: path, errno: errno) }
            if created { try POSIX.fsyncDirectory(containing: path) }
            return (fd, kept, false)
        } catch {
            close(fd)
            throw error
        }
    }
}

enum POSIX {
    static func describe(_ code: Int32) -> String {
        guard let s = strerror(code) else { return "errno \(code)" }
        return "\(String(cString: s)) (errno \(code))"
    }

    /// Opens `path` write-only without following a symlink (at the file or on the way to it, see
    /// `SafePath`), creating it (0644) if needed.
    static func openForWriting(_ path: String) throws -> (fd: Int32, created: Bool) {
        let base = O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK
        return try SafePath.inParent(of: path) { dir, name in
            for _ in 0..<8 {
                let fd = openat(dir, name, base)
                if fd >= 0 { return (fd, false) }
                let e = errno
                if e == EINTR { continue }
                if e == ELOOP {
                    throw FileIOError(operation: "use as a partial file (it is a symbolic link now; something replaced it)",
                                      path: path, errno: e)
                }
                guard e == ENOENT else { throw FileIOError(operation: "open", path: path, errno: e) }
                let created = openat(dir, name, base | O_CREAT | O_EXCL, 0o644)
                if created >= 0 { return (created, true) }
                let e2 = errno
                if e2 == EEXIST || e2 == EINTR { continue }  // lost a race with another creator: open it
                throw FileIOError(operation: "create", path: path, errno: e2)
            }
            throw FileIOError(operation: "open", path: path, errno: EAGAIN)
        }
    }

    static func directory(of path: String) -> String { PathBytes.directory(of: path) }

    static func fsyncDirectory(containing path: String) throws {
        let dir = directory(of: path)
        let fd = try SafePath.openDirectory(dir)
        defer { close(fd) }
        // Some filesystems cannot fsync a directory (EINVAL); their metadata is then as durable as it gets.
        if fsync(fd) != 0, errno != EINVAL {
            throw FileIOError(operation: "fsync directory", path: dir, errno: errno)
        }
    }

    static func fsyncFile(_ path: String) throws {
        let fd = try SafePath.inParent(of: path) { dir, name in
            let fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            guard fd >= 0 else { throw FileIOError(operation: "open", path: path, errno: errno) }
            return fd
        }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw FileIOError(operation: "fsync", path: path, errno: errno) }
    }

    /// (device, inode) of a path, nil if it does not exist; symlinks are not followed (see `SafePath`).
    static func identity(_ path: String) -> (dev: UInt64, ino: UInt64)? {
        SafePath.lstatSafely(path).map { (UInt64($0.st_dev), UInt64($0.st_ino)) }
    }

    static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    /// Seconds since the Unix epoch.
    static func wallClock() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
