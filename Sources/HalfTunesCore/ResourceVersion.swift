// Whether a response is the version of a resource that bytes already on disk came from (pure, no I/O).
import HalfTunesProtocol

/// What names one version of a resource: its strong ETag, its Last-Modified and its complete length. Every
/// response whose body is appended to or merged with kept bytes (a resumed 206 after kill -9, pause/resume,
/// resume data or a retry; a further segment's 206) goes through `mismatch(_:)` against the version the kept
/// bytes were fetched against, so that two versions are never spliced, whatever the server does with
/// `If-Range` (BusyBox httpd answers 206 whatever it says).
///
/// A weak ETag (`W/"…"`) is not a validator for this: it says "equivalent", not "the same bytes", so a kept
/// weak ETag is not compared (its Last-Modified and length still are). A kept strong ETag must come back
/// unchanged: a weak one, another one or none at all is another version. A Last-Modified left out is another
/// version too, unless the same strong ETag came back (a 206 need not repeat Last-Modified, RFC 9110 15.3.7).
/// An ETag that arrived with bytes replaced (U+FFFD) counts as weak (`strongETag`).
public struct ResourceVersion: Sendable, Equatable, CustomStringConvertible {
    /// The strong ETag, as sent (nil when there was none or it was weak).
    public var etag: String?
    public var lastModified: String?
    /// The complete length (`Content-Range` total of a 206 or 416, `Content-Length` of a 200).
    public var total: Int64?

    public init(etag: String?, lastModified: String?, total: Int64?) {
        self.etag = Self.strongETag(etag)
        self.lastModified = lastModified.map(\.trimmingSpaces).flatMap { $0.isEmpty ? nil : $0 }
        self.total = total
    }

    /// The version kept bytes were fetched against, as journaled.
    public init(validators: Validators?, total: Int64?) {
        self.init(etag: validators?.etag, lastModified: validators?.lastModified, total: total)
    }

    /// The version a response names. A weak ETag names no ETag here, so it never matches a kept strong one.
    public static func of(status: Int, headers: [(String, String)]) -> ResourceVersion {
        let etag = ResumeDecision.header("ETag", in: headers)
        var version = ResourceVersion(etag: etag, lastModified: ResumeDecision.header("Last-Modified", in: headers),
                                      total: nil)
        switch status {
        case 206, 416:
            version.total = ResumeDecision.header("Content-Range", in: headers).flatMap(ContentRange.parse)?.total
        default:
            version.total = ResumeDecision.contentLength(headers)
        }
        return version
    }

    /// `etag` trimmed when it can tell versions apart byte for byte: nil when absent, empty or weak, and nil when
    /// it holds U+FFFD. HTTP/1 heads reach us with bytes that are not UTF-8 read as ISO-8859-1
    /// (`ResponseHeadRecoder`), but swift-nio-http2 decodes HTTP/2 fields as UTF-8 with replacement: `"v\xE4"` and
    /// `"v\xE5"` both arrive as `"v\u{FFFD}"`, so such an ETag could stand for other bytes than the kept ones'.
    public static func strongETag(_ etag: String?) -> String? {
        guard let etag = etag?.trimmingSpaces, !etag.isEmpty, !isWeak(etag), !etag.unicodeScalars.contains("\u{FFFD}")
        else { return nil }
        return etag
    }

    public static func isWeak(_ etag: String) -> Bool {
        etag.hasPrefix("W/") || etag.hasPrefix("w/")
    }

    /// Why `response` is not the version `self` names, or nil when it is: every part `self` has must come back
    /// equal. With `partial`, a part the response leaves out is not held against it (a 416, which
    /// continues nothing and rarely carries validators); a part it gives must still be equal.
    public func mismatch(_ response: ResourceVersion, partial: Bool = false) -> String? {
        if let etag {
            switch response.etag {
            case nil where !partial: return "the server no longer sends the ETag \(etag) (or sends a weak one)"
            case let other? where other != etag: return "the ETag is now \(other), not \(etag)"
            default: break
            }
        }
        // RFC 9110 15.3.7: a 206 must repeat the ETag, not Last-Modified; the same strong ETag (a validator that
        // changes with every byte of the representation) vouches for the bytes when Last-Modified is left out.
        let vouched = etag != nil && response.etag == etag
        if let lastModified {
            switch response.lastModified {
            case nil where !partial && !vouched: return "the server no longer sends Last-Modified (\(lastModified))"
            case let other? where other != lastModified: return "Last-Modified is now \(other), not \(lastModified)"
            default: break
            }
        }
        if let total {
            switch response.total {
            case nil where !partial: return "the server no longer gives the complete length (\(total) bytes)"
            case let other? where other != total: return "the length is now \(other) bytes, not \(total)"
            default: break
            }
        }
        return nil
    }

    public var description: String {
        [etag.map { "ETag \($0)" }, lastModified.map { "Last-Modified \($0)" }, total.map { "\($0) bytes" }]
            .compactMap { $0 }.joined(separator: ", ")
    }
}
