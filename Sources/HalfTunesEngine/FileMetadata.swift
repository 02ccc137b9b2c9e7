// Setting a published file's freedesktop xattrs (user.xdg.origin.url, user.xdg.referrer.url) and mtime.
import CLinuxFile
import Foundation
import HalfTunesCore

extension PublishMetadata {
    /// Sets the attributes and the mtime on the complete file, through its open descriptor (never by path: a
    /// symlink or another file a user put at the path meanwhile is not touched). No fsync of its own: the publish
    /// that follows makes them durable (it fsyncs a file that was not durable yet, and the directories, whose
    /// fsync commits the inode's metadata journaled before it on ext4 and xfs), so a download costs no extra
    /// fsync. A file system without user xattrs (`ENOTSUP`) or that refuses them (`EPERM`) is skipped; returns
    /// what could not be set, for the log.
    @discardableResult
    public func apply(to file: OpenPartial) -> [String] {
        guard !isEmpty else { return [] }
        var problems: [String] = []
        for (name, value) in [("user.xdg.origin.url", originURL), ("user.xdg.referrer.url", referrerURL)] {
            guard let value else { continue }
            let bytes = Array(value.utf8)
            if htd_fset_xattr(file.fd, name, bytes, bytes.count) != 0, errno != ENOTSUP, errno != EPERM {
                problems.append("\(name): \(String(cString: strerror(errno)))")
            }
        }
        if let mtime = modificationTime {
            let seconds = mtime.rounded(.down)
            if htd_fset_mtime(file.fd, Int64(seconds), Int((mtime - seconds) * 1e9)) != 0 {
                problems.append("mtime: \(String(cString: strerror(errno)))")
            }
        }
        return problems
    }
}
