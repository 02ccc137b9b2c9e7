// What to do with a response head, given the offset we asked for: append, restart, complete, retry or fail.
import HalfTunesProtocol

/// Pure decision on a response head (no I/O).
public enum ResumeDecision: Sendable, Equatable {
    /// Offset 0 request, 2xx.
    case start(expectedTotal: Int64?)
    /// 206 whose Content-Range starts exactly at the requested offset.
    case append(expectedTotal: Int64?)
    /// Offset > 0 requested but got 200: truncate to 0 and write this body.
    case restartFromZero(expectedTotal: Int64?, reason: String)
    /// 416 with "bytes */N" and N == requested offset.
    case alreadyComplete(total: Int64)
    /// 206 at the requested offset, but from another version than the kept bytes (`ResourceVersion`: another
    /// strong ETag, Last-Modified or complete length, or one of them left out): a server that ignored If-Range.
    /// The kept bytes are discarded and the download asks again from byte 0, within the same attempt.
    case changed(reason: String)
    /// 206 with a Content-Range not matching the request, or another 416: truncate the partial to 0 and fail
    /// transiently (durableBytes 0) so the next attempt starts fresh.
    case discardAndRetry(reason: String)
    /// Non-2xx final status.
    case fail(TaskError, transient: Bool, retryAfter: Double?)

    /// 5xx statuses that say the request itself cannot work, so retrying it would not help: 501 Not
    /// Implemented, 505 HTTP Version Not Supported, 506 Variant Also Negotiates, 508 Loop Detected, 510 Not
    /// Extended, 511 Network Authentication Required (a captive portal: a person must act).
    static let permanentServerStatuses: Set<Int> = [501, 505, 506, 508, 510, 511]

    /// Whether retrying a request that got `status` later may help: 408, 429 and every 5xx except
    /// `permanentServerStatuses` (500, 502, 503, 504, 507, 509, 52x from proxies and CDNs, ...). Other 4xx
    /// (and 3xx that were not followed) are permanent.
    public static func isTransient(status: Int) -> Bool {
        if status == 408 || status == 429 { return true }
        return (500...599).contains(status) && !permanentServerStatuses.contains(status)
    }

    /// The stable code for a failing status: `serverBusy` (429, 503), `timedOut` (408, 504), else `httpStatus`.
    public static func errorCode(status: Int) -> String {
        switch status {
        case 429, 503: return TaskErrorCode.serverBusy
        case 408, 504: return TaskErrorCode.timedOut
        default: return TaskErrorCode.httpStatus
        }
    }

    public static func decide(requestedOffset: Int64, status: Int, headers: [(String, String)], now: Double) -> ResumeDecision {
        decide(requestedOffset: requestedOffset, status: status, headers: headers, now: now, sentIfRange: nil, url: nil)
    }

    /// - Parameters:
    ///   - sentIfRange: the If-Range value that was sent, if known. A 200 carrying that same validator means the
    ///     server ignored the Range ("rangeNotHonored"); otherwise a 200 means the resource changed.
    ///   - url: named in failure messages ("HTTP 404 Not Found from <url>").
    ///   - knownTotal: the resource's length as an earlier response gave it. A 416 without `Content-Range` to a
    ///     request that carried `If-Range` (so the resource is unchanged: a changed one is answered 200) means
    ///     everything is already here when that length is the requested offset.
    ///   - kept: the version the kept bytes were fetched against (their journaled validators and length). A 206
    ///     that would continue them must name exactly that version (`.changed` otherwise); a 416 that says they
    ///     are complete must not name another.
    public static func decide(requestedOffset: Int64, status: Int, headers: [(String, String)], now: Double,
                              sentIfRange: String?, url: String?, knownTotal: Int64? = nil,
                              kept: ResourceVersion? = nil) -> ResumeDecision {
        if (200...299).contains(status) || status == 416, let problem = lengthProblem(headers) {
            // Refused before any arithmetic: no sum of offsets and lengths can overflow past this point.
            return .fail(TaskError(code: TaskErrorCode.invalidResponse, message: problem + (url.map { " from \($0)" } ?? "")),
                         transient: false, retryAfter: nil)
        }
        let contentLength = contentLength(headers)
        let kept = requestedOffset > 0 ? kept : nil
        let response = ResourceVersion.of(status: status, headers: headers)
        switch status {
        case 206:
            guard let value = header("Content-Range", in: headers), let range = ContentRange.parse(value),
                  let start = range.start else {
                let got = header("Content-Range", in: headers).map { "'\($0)'" } ?? "none"
                return .discardAndRetry(reason: "206 with an unusable Content-Range (\(got)) for offset \(requestedOffset)")
            }
            guard start == requestedOffset else {
                return .discardAndRetry(reason: "206 starts at byte \(start), but byte \(requestedOffset) was requested")
            }
            if requestedOffset == 0 {
                return .start(expectedTotal: range.total)
            }
            if let why = kept?.mismatch(response) {
                return .changed(reason: "a 206 for byte \(requestedOffset) came from another version: \(why)")
            }
            return .append(expectedTotal: range.total)
        case 200...299:
            if requestedOffset == 0 {
                return .start(expectedTotal: contentLength)
            }
            return .restartFromZero(expectedTotal: contentLength,
                                    reason: restartReason(headers: headers, sentIfRange: sentIfRange))
        case 416 where requestedOffset > 0:
            if let why = kept?.mismatch(response, partial: true) {
                return .changed(reason: "a 416 for byte \(requestedOffset) came from another version: \(why)")
            }
            if let value = header("Content-Range", in: headers), let range = ContentRange.parse(value),
               range.start == nil, let total = range.total, total == requestedOffset {
                return .alreadyComplete(total: total)
            }
            if header("Content-Range", in: headers) == nil, sentIfRange != nil, knownTotal == requestedOffset {
                return .alreadyComplete(total: requestedOffset)
            }
            let got = header("Content-Range", in: headers).map { "'\($0)'" } ?? "no Content-Range"
            return .discardAndRetry(reason: "416 Range Not Satisfiable (\(got)) for offset \(requestedOffset)")
        default:
            let reasonPhrase = HTTPStatusText.reasonPhrase(status)
            var message = "HTTP \(status) \(reasonPhrase)"
            if let url { message += " from \(url)" }
            let transient = isTransient(status: status)
            let code = errorCode(status: status)
            let retryAfter = header("Retry-After", in: headers).flatMap { RetryAfter.parse($0, now: now) }
            return .fail(TaskError(code: code, message: message, httpStatus: status), transient: transient,
                         retryAfter: retryAfter)
        }
    }

    /// Range/If-Range for a request: only when offset > 0 AND validators give an ifRangeValue; otherwise none
    /// (never a bare Range, which could splice two versions of a file).
    public static func rangeHeaders(offset: Int64, validators: Validators?) -> [(String, String)] {
        guard offset > 0, let ifRange = validators?.ifRangeValue else { return [] }
        return [("Range", "bytes=\(offset)-"), ("If-Range", ifRange)]
    }

    private static func restartReason(headers: [(String, String)], sentIfRange: String?) -> String {
        if let acceptRanges = header("Accept-Ranges", in: headers), acceptRanges.trimmingSpaces.lowercased() == "none" {
            return "rangeNotHonored"
        }
        if let sent = sentIfRange {
            let etag = header("ETag", in: headers)?.trimmingSpaces
            let lastModified = header("Last-Modified", in: headers)?.trimmingSpaces
            if etag == sent || lastModified == sent { return "rangeNotHonored" }
        }
        return "resourceChanged"
    }

    public static func header(_ name: String, in headers: [(String, String)]) -> String? {
        for (n, v) in headers where n.count == name.count && n.lowercased() == name.lowercased() { return v }
        return nil
    }

    /// Content-Length, unless the body is chunked (then the length is not known in advance); nil past
    /// `HalfTunes.maxByteCount` too (`lengthProblem` says why such a response is refused).
    package static func contentLength(_ headers: [(String, String)]) -> Int64? {
        if let te = header("Transfer-Encoding", in: headers), te.lowercased().contains("chunked") { return nil }
        guard let value = header("Content-Length", in: headers), let n = Int64(value.trimmingSpaces), n >= 0,
              n <= HalfTunes.maxByteCount else {
            return nil
        }
        return n
    }

    /// Why a response's Content-Length or Content-Range is refused: a number past `HalfTunes.maxByteCount` (2^62
    /// bytes; e.g. `Content-Length: 9223372036854775807`), which no real resource has and whose sums would
    /// overflow. nil when every number in them is within it.
    public static func lengthProblem(_ headers: [(String, String)]) -> String? {
        for name in ["Content-Length", "Content-Range"] {
            guard let value = header(name, in: headers) else { continue }
            var number: Int64 = 0 // the run of digits being read, exact up to the bound
            for byte in value.utf8 {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else {
                    number = 0
                    continue
                }
                let next = number.multipliedReportingOverflow(by: 10)
                let sum = next.partialValue.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
                guard !next.overflow, !sum.overflow, sum.partialValue <= HalfTunes.maxByteCount else {
                    let shown = value.count > 64 ? String(value.prefix(64)) + "…" : value
                    return "\(name) '\(shown)' names more than \(HalfTunes.maxByteCount) bytes (2^62), the most halftunesd accepts"
                }
                number = sum.partialValue
            }
        }
        return nil
    }
}

/// A parsed `Content-Range` header: "bytes 0-99/200", "bytes */200", "bytes 0-99/*".
public struct ContentRange: Equatable, Sendable {
    public var start: Int64?
    public var end: Int64?
    public var total: Int64?

    public init(start: Int64?, end: Int64?, total: Int64?) {
        self.start = start
        self.end = end
        self.total = total
    }

    public static func parse(_ value: String) -> ContentRange? {
        let trimmed = value.trimmingSpaces
        guard trimmed.count > 6, trimmed.prefix(5).lowercased() == "bytes" else { return nil }
        let afterUnit = trimmed.dropFirst(5)
        guard let first = afterUnit.first, first == " " || first == "\t" else { return nil }
        let spec = String(afterUnit).trimmingSpaces
        let halves = spec.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2 else { return nil }
        let rangePart = halves[0], totalPart = halves[1]
        var total: Int64?
        if totalPart != "*" {
            guard let t = parseDigits(totalPart) else { return nil }
            total = t
        }
        if rangePart == "*" {
            guard total != nil else { return nil }  // "bytes */*" says nothing
            return ContentRange(start: nil, end: nil, total: total)
        }
        let bounds = rangePart.split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let start = parseDigits(bounds[0]), let end = parseDigits(bounds[1]),
              start <= end else { return nil }
        if let total, end >= total { return nil }
        return ContentRange(start: start, end: end, total: total)
    }

    /// A byte position or length: digits only, at most `HalfTunes.maxByteCount` (so `end + 1` cannot overflow).
    private static func parseDigits(_ s: Substring) -> Int64? {
        guard !s.isEmpty, s.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int64(s), n <= HalfTunes.maxByteCount else {
            return nil
        }
        return n
    }
}
