// SegmentDecision: a table of response heads to a segment's request.
import HalfTunesCore
import HalfTunesProtocol
import Testing

@Suite struct SegmentDecisionTests {
    let validators = Validators(etag: "\"v1\"", lastModified: "Sat, 22 Nov 2025 03:51:27 GMT")

    func decide(_ status: Int, _ headers: [(String, String)], validators: Validators? = nil) -> SegmentDecision {
        SegmentDecision.decide(range: 1000..<2000, total: 5000, validators: validators ?? self.validators,
                               status: status, headers: headers, now: 0, url: "http://h/f")
    }

    let lastModified = ("Last-Modified", "Sat, 22 Nov 2025 03:51:27 GMT")

    @Test func onlyTheExactRangeOfTheSameVersionIsWritten() {
        #expect(decide(206, [("Content-Range", "bytes 1000-1999/5000"), ("ETag", "\"v1\""), lastModified]) == .accept)
        #expect(decide(206, [("Content-Range", "bytes 1000-1999/5000"), ("ETag", "\"v1\"")]) == .accept,
                "a 206 need not repeat Last-Modified: the same strong ETag vouches")
        // A weak ETag kept is no validator: Last-Modified and the length decide.
        #expect(decide(206, [("Content-Range", "bytes 1000-1999/5000"), ("ETag", "W/\"v9\""), lastModified],
                       validators: Validators(etag: "W/\"v1\"", lastModified: lastModified.1)) == .accept)
        #expect(decide(206, [("content-range", "bytes 1000-1999/5000"), ("Last-Modified", "Sat, 22 Nov 2025 03:51:27 GMT")],
                       validators: Validators(etag: nil, lastModified: "Sat, 22 Nov 2025 03:51:27 GMT")) == .accept)
    }

    @Test func anotherVersionIsAChange() {
        let cases: [(Int, [(String, String)])] = [
            (206, [("Content-Range", "bytes 1000-1999/5000"), ("ETag", "\"v2\"")]),
            (206, [("Content-Range", "bytes 1000-1999/6000"), ("ETag", "\"v1\"")]),
            (206, [("Content-Range", "bytes 1000-1999/*"), ("ETag", "\"v2\"")]),
            (206, [("Content-Range", "bytes 1000-1999/*"), ("ETag", "\"v1\""), lastModified]),
            // A validator left out, or a strong ETag come back weak: not the same version, If-Range or not
            // (a server that ignores If-Range answers 206 for any version).
            (206, [("Content-Range", "bytes 1000-1999/5000")]),
            (206, [("Content-Range", "bytes 1000-1999/5000"), lastModified]),
            (206, [("Content-Range", "bytes 1000-1999/5000"), ("ETag", "W/\"v1\""), lastModified]),
            (206, [("Content-Range", "bytes 1000-1999/5000"), ("ETag", "\"v1\""), ("Last-Modified", "Sun, 23 Nov 2025 00:00:00 GMT")]),
            (200, [("ETag", "\"v2\""), ("Content-Length", "5000")]),
            (200, [("Content-Length", "5000")]),
            (416, [("Content-Range", "bytes */900")]),
            (416, []),
        ]
        for (status, headers) in cases {
            guard case .changed = decide(status, headers) else {
                Issue.record("\(status) \(headers) → \(decide(status, headers))")
                continue
            }
        }
        #expect(decide(206, [("Content-Range", "bytes 1000-1999/5000"), ("Last-Modified", "Sun, 23 Nov 2025 00:00:00 GMT")],
                       validators: Validators(etag: nil, lastModified: "Sat, 22 Nov 2025 03:51:27 GMT"))
                == .changed(reason: "Last-Modified is now Sun, 23 Nov 2025 00:00:00 GMT, not Sat, 22 Nov 2025 03:51:27 GMT"))
    }

    @Test func theSameVersionServedOtherwiseIsUnsplittable() {
        let cases: [(Int, [(String, String)])] = [
            (200, [("ETag", "\"v1\""), ("Content-Length", "5000"), lastModified]),
            (206, [("Content-Range", "bytes 0-4999/5000"), ("ETag", "\"v1\""), lastModified]),
            (206, [("Content-Range", "bytes 1000-1499/5000"), ("ETag", "\"v1\""), lastModified]),
            (206, [("Content-Range", "nonsense")]),
            (206, []),
        ]
        for (status, headers) in cases {
            guard case .unsplittable = decide(status, headers) else {
                Issue.record("\(status) \(headers) → \(decide(status, headers))")
                continue
            }
        }
    }

    @Test func busyServersRefuseOthersFail() {
        guard case .refused(let error, let retryAfter) = decide(503, [("Retry-After", "7")]) else {
            Issue.record("503 not refused")
            return
        }
        #expect(error.code == TaskErrorCode.serverBusy && retryAfter == 7)
        guard case .refused = decide(429, []) else {
            Issue.record("429 not refused")
            return
        }
        #expect(decide(404, []) == .failed(TaskError(code: TaskErrorCode.httpStatus, message: "HTTP 404 Not Found from http://h/f",
                                                     httpStatus: 404), transient: false))
        guard case .failed(_, true) = decide(500, []) else {
            Issue.record("500 not transient")
            return
        }
    }
}
