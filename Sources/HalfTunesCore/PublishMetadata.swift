// Where a published file came from: the freedesktop xattrs' values (user.xdg.origin.url, user.xdg.referrer.url)
// and its mtime (FileMetadata.swift in HalfTunesEngine sets them on the file).
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
}
