// Where a published file came from: the freedesktop xattrs (user.xdg.origin.url, user.xdg.referrer.url) and mtime.
import CLinuxFile
import Foundation

/// What a download's file carries when it is published, as `wget --xattr -N` and browsers do: the URL it came
/// from (credentials stripped), the page that referred to it, and the server's `Last-Modified` as its mtime.
public struct PublishMetadata: Equatable, Sendable {
    public var originURL: String?
    public var referrerURL: String?
    /// Seconds since 1970; nil leaves the mtime as the write left it.
    public var modificationTime: Double?

    public init(originURL: String? = nil, referrerURL: String? = nil, modificationTime: Double? = nil) {
        self.originURL = originURL
        self.referrerURL = referrerURL
        self.modificationTime = modificationTime
    }

    public var isEmpty: Bool { originURL == nil && referrerURL == nil && modificationTime == nil }

    /// For a download of `url` with these request headers and the response's `Last-Modified`.
    public static func of(url: String, headers: [String: String], lastModified: String?, preserveModificationTime: Bool)
        -> PublishMetadata
    {
        let referrer = headers.first { $0.key.lowercased() == "referer" }?.value
        return PublishMetadata(originURL: strippingCredentials(url), referrerURL: referrer.map(strippingCredentials),
                               modificationTime: preserveModificationTime ? lastModified.flatMap(HTTPDate.parse) : nil)
    }

    /// `url` without its `user:password@` part (and its fragment), as the freedesktop spec asks.
    public static func strippingCredentials(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.user != nil || components.password != nil
                || components.fragment != nil else { return url }
        components.user = nil
        components.password = nil
        components.fragment = nil
        return components.string ?? url
    }

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
