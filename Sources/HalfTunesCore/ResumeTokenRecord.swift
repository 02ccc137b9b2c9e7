// The kept partial data of a task canceled with resume data, as the state holds it.
import HalfTunesProtocol

/// One row of `resume_tokens`: the kept partial data of a task canceled with `produceResumeData: true`.
/// The opaque `token` is what the client holds; the path never leaves the daemon.
public struct ResumeTokenRecord: Codable, Sendable, Equatable {
    public var token: String
    public var session: String
    public var url: String
    public var partialPath: String
    public var destination: String
    /// The kept data's ranges (`bytes` is their sum).
    public var ranges: ByteRanges
    public var bytes: Int64 { ranges.count }
    public var bytesExpected: Int64?
    public var etag: String?
    public var lastModified: String?
    public var createdAt: Double

    public init(token: String, session: String, url: String, partialPath: String, destination: String,
                ranges: ByteRanges, bytesExpected: Int64? = nil, etag: String? = nil, lastModified: String? = nil,
                createdAt: Double) {
        self.token = token
        self.session = session
        self.url = url
        self.partialPath = partialPath
        self.destination = destination
        self.ranges = ranges
        self.bytesExpected = bytesExpected
        self.etag = etag
        self.lastModified = lastModified
        self.createdAt = createdAt
    }

    /// A token keeping the first `bytes` bytes.
    public init(token: String, session: String, url: String, partialPath: String, destination: String, bytes: Int64,
                bytesExpected: Int64? = nil, etag: String? = nil, lastModified: String? = nil, createdAt: Double) {
        self.init(token: token, session: session, url: url, partialPath: partialPath, destination: destination,
                  ranges: ByteRanges(prefix: bytes), bytesExpected: bytesExpected, etag: etag,
                  lastModified: lastModified, createdAt: createdAt)
    }
}
