// Which file an upload sends: its path and the file (device and inode) it was pinned to when the task was created.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
import Darwin
#endif

/// Which file a path named when it was checked: its device and inode, stored as "<device>:<inode>".
/// An upload is pinned to the file its client was allowed to read when the task was created: every
/// attempt must open that same file, whatever its path points to by then.
public struct FileID: Sendable, Equatable, CustomStringConvertible {
    public var device: UInt64
    public var inode: UInt64

    public init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }

    public init(_ st: stat) { self.init(device: UInt64(st.st_dev), inode: UInt64(st.st_ino)) }

    /// From "<device>:<inode>"; nil for anything else.
    public init?(text: String) {
        let parts = text.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return nil }
        self.init(device: device, inode: inode)
    }

    public var description: String { "\(device):\(inode)" }
}

/// An upload's file, opened by `UploadSource.open` when the attempt starts.
public struct UploadBody: Sendable, Equatable {
    public var path: String
    /// The file every attempt must open (pinned when the task was created; nil: not pinned).
    public var fileID: FileID?

    public init(path: String, fileID: FileID? = nil) {
        self.path = path
        self.fileID = fileID
    }
}
