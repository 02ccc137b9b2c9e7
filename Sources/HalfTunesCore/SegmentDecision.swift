// What the response head of an extra segment's request means: write it, or why not (pure, no I/O).
import HalfTunesProtocol

/// A segment asks for exactly `range` of a resource whose first response gave `total` and `validators`, with
/// `Range: bytes=a-b` and `If-Range`. Only a 206 with exactly that `Content-Range` of exactly that version
/// (`ResourceVersion.mismatch`: the same strong ETag, Last-Modified and length, none left out) is written;
/// everything else says how the download goes on.
public enum SegmentDecision: Sendable, Equatable {
    /// 206 with exactly the range and total asked for.
    case accept
    /// The same resource, but the server does not serve this range as asked (a 200 carrying the same
    /// validator, a 206 with another range of the same length): one connection from now on.
    case unsplittable(reason: String)
    /// Another version of the resource (another validator, another length, 416): nothing of it may be mixed
    /// with what was written, so the download starts again from byte 0.
    case changed(reason: String)
    /// 429 or 503: the server wants fewer connections.
    case refused(TaskError, retryAfter: Double?)
    /// Any other status.
    case failed(TaskError, transient: Bool)

    public static func decide(range: Range<Int64>, total: Int64, validators: Validators, status: Int,
                              headers: [(String, String)], now: Double, url: String) -> SegmentDecision {
        let expected = ResourceVersion(validators: validators, total: total)
        let response = ResourceVersion.of(status: status, headers: headers)
        let asked = "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(total)"
        switch status {
        case 206:
            guard let value = ResumeDecision.header("Content-Range", in: headers),
                  let got = ContentRange.parse(value) else {
                let got = ResumeDecision.header("Content-Range", in: headers).map { "'\($0)'" } ?? "none"
                return .unsplittable(reason: "206 with an unusable Content-Range (\(got)) for \(asked)")
            }
            // Exactly the first response's version (ResourceVersion), or nothing of it is written.
            if let why = expected.mismatch(response) { return .changed(reason: why) }
            guard got.start == range.lowerBound, got.end == range.upperBound - 1, got.total == total else {
                return .unsplittable(reason: "206 with Content-Range '\(value)' for \(asked)")
            }
            return .accept
        case 200...299:
            if let why = expected.mismatch(response) {
                return .changed(reason: "a \(status) with another version answered \(asked): \(why)")
            }
            return .unsplittable(reason: "the server ignored Range (\(status) for \(asked))")
        case 416:
            return .changed(reason: "416 Range Not Satisfiable for \(asked)")
        default:
            switch ResumeDecision.decide(requestedOffset: range.lowerBound, status: status, headers: headers, now: now,
                                         sentIfRange: nil, url: url) {
            case let .fail(error, transient, retryAfter):
                if status == 429 || status == 503 { return .refused(error, retryAfter: retryAfter) }
                return .failed(error, transient: transient)
            default:
                let error = TaskError(code: TaskErrorCode.invalidResponse, message: "HTTP \(status) from \(url) for \(asked)")
                return .failed(error, transient: true)
            }
        }
    }
}
