// An upload's source file: the one place it is opened; read in chunks with pread; checked for changes.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
import Darwin
#endif
import HalfTunesCore
import HalfTunesProtocol
import NIOConcurrencyHelpers
import NIOCore

/// Why an upload's source cannot be sent (`TaskErrorCode.sourceUnreadable`, permanent).
public struct UploadSourceError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
    public var taskError: TaskError { TaskError(code: TaskErrorCode.sourceUnreadable, message: message) }
}

/// An open source file. Every attempt of an upload opens the file afresh (so an attempt after a change sends
/// the file as it is then, whole) and reads it from byte 0; the size is fixed when it is opened, and a file
/// that grows, shrinks or is modified while it is sent fails the attempt.
///
/// Access: the file is opened by the daemon with its own rights (`openedAsUID`). Opening happens only in
/// `open(path:)`, so that checking the client's right to read it (or receiving a descriptor from the client)
/// can be put in this one place.
public final class UploadSource: Sendable {
    public let path: String
    /// Length in bytes when opened: the request's Content-Length.
    public let size: Int64
    /// The effective uid the file was opened as.
    public let openedAsUID: UInt32
    private let fd: Int32
    private let identity: Identity
    private let isClosed = NIOLockedValueBox(false)

    private struct Identity: Equatable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modifiedSeconds: Int
        var modifiedNanoseconds: Int
    }

    private init(path: String, fd: Int32, identity: Identity) {
        self.path = path
        self.fd = fd
        self.identity = identity
        self.size = identity.size
        self.openedAsUID = UInt32(geteuid())
    }

    deinit { close() }

    /// Checks that `path` names a regular file the daemon can open for reading; returns its length.
    public static func inspect(path: String) throws(UploadSourceError) -> Int64 {
        let source = try open(path: path)
        defer { source.close() }
        return source.size
    }

    /// The file's device and inode.
    public var fileID: FileID { FileID(device: identity.device, inode: identity.inode) }

    /// Opens `path` for reading. It must be absolute and name (possibly through symlinks) a regular file;
    /// anything else (directories, FIFOs, devices) is refused before it is opened. With `expected`, the
    /// opened file must be that one (same device and inode): a path that now leads to another file (a
    /// replaced file, a link pointed elsewhere) is refused, nothing of it is read.
    public static func open(path: String, expected: FileID? = nil) throws(UploadSourceError) -> UploadSource {
        guard path.hasPrefix("/") else {
            throw UploadSourceError("The file to upload must be given as an absolute path (got '\(path)')")
        }
        var before = stat()
        guard stat(path, &before) == 0 else { throw failure(errno, path: path, doing: "find") }
        try requireRegular(before, path: path)
        var fd: Int32 = -1
        repeat {
            fd = systemOpen(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        } while fd < 0 && errno == EINTR
        guard fd >= 0 else { throw failure(errno, path: path, doing: "open") }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let e = errno
            systemClose(fd)
            throw failure(e, path: path, doing: "inspect")
        }
        do {
            try requireRegular(st, path: path)
        } catch {
            systemClose(fd)
            throw error
        }
        if let expected, FileID(st) != expected {
            systemClose(fd)
            throw UploadSourceError("\(path) is no longer the file this upload was created with (it was replaced, or "
                + "a link on its path now leads elsewhere); nothing of it was sent. Create a new upload to send it")
        }
        return UploadSource(path: path, fd: fd, identity: identity(of: st))
    }

    /// Reads up to `count` bytes at `offset`. Reading nothing before `size` means the file became shorter.
    public func read(at offset: Int64, count: Int) throws(UploadSourceError) -> ByteBuffer {
        let wanted = Int(min(Int64(count), size - offset))
        var buffer = ByteBufferAllocator().buffer(capacity: max(wanted, 0))
        guard wanted > 0 else { return buffer }
        var failure: Int32 = 0
        let fd = self.fd
        while buffer.readableBytes < wanted {
            let have = buffer.readableBytes
            let got = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: wanted - have) { raw -> Int in
                let n = pread(fd, raw.baseAddress, wanted - have, off_t(offset) + off_t(have))
                if n < 0 { failure = errno }
                return max(n, 0)
            }
            if failure == EINTR {
                failure = 0
                continue
            }
            if failure != 0 { throw Self.failure(failure, path: path, doing: "read") }
            if got == 0 {
                let now = currentSize().map { "; it now has \($0) bytes" } ?? ""
                throw UploadSourceError("\(path) became shorter while it was being sent (it had \(size) bytes\(now)); "
                    + "the upload was stopped")
            }
        }
        return buffer
    }

    /// Fails when the file was modified or changed length since it was opened.
    public func verifyUnchanged() throws(UploadSourceError) {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw Self.failure(errno, path: path, doing: "inspect") }
        let now = Self.identity(of: st)
        guard now == identity else {
            let what = now.size != identity.size
                ? "its length went from \(identity.size) to \(now.size) bytes" : "it was modified"
            throw UploadSourceError("\(path) changed while it was being sent (\(what)); the upload was stopped")
        }
    }

    /// Closes the descriptor (idempotent).
    public func close() {
        let wasOpen = isClosed.withLockedValue { closed -> Bool in
            defer { closed = true }
            return !closed
        }
        if wasOpen { systemClose(fd) }
    }

    private func currentSize() -> Int64? {
        var st = stat()
        return fstat(fd, &st) == 0 ? Int64(st.st_size) : nil
    }

    private static func identity(of st: stat) -> Identity {
        Identity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: Int64(st.st_size),
                 modifiedSeconds: Int(st.st_mtim.tv_sec), modifiedNanoseconds: Int(st.st_mtim.tv_nsec))
    }

    private static func requireRegular(_ st: stat, path: String) throws(UploadSourceError) {
        let type = st.st_mode & S_IFMT
        guard type != S_IFREG else { return }
        let kind: String
        switch type {
        case S_IFDIR: kind = "a directory"
        case S_IFIFO: kind = "a FIFO"
        case S_IFSOCK: kind = "a socket"
        case S_IFCHR, S_IFBLK: kind = "a device"
        default: kind = "not a regular file"
        }
        throw UploadSourceError("\(path) is \(kind); only regular files can be uploaded")
    }

    private static func failure(_ code: Int32, path: String, doing operation: String) -> UploadSourceError {
        switch code {
        case ENOENT, ENOTDIR:
            return UploadSourceError("The file to upload, \(path), does not exist")
        case EACCES, EPERM:
            return UploadSourceError("halftunesd may not read \(path) (\(POSIX.describe(code))); "
                + "make it readable by the daemon's user")
        default:
            return UploadSourceError("Cannot \(operation) \(path): \(POSIX.describe(code))")
        }
    }
}

private func systemOpen(_ path: String, _ flags: Int32) -> Int32 { open(path, flags) }

private func systemClose(_ fd: Int32) { _ = close(fd) }
