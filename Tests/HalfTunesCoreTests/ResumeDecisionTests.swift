// Unit tests: ResumeDecision, ContentRange, RetryAfter, rangeHeaders, Validators (no I/O).
import HalfTunesCore
import HalfTunesProtocol
import Testing

@Suite struct ResumeDecisionTests {
    let now = 1_000_000_000.0

    @Test func okFromZeroStartsWithContentLength() {
        #expect(ResumeDecision.decide(requestedOffset: 0, status: 200, headers: [("Content-Length", "100")], now: now)
            == .start(expectedTotal: 100))
        #expect(ResumeDecision.decide(requestedOffset: 0, status: 200,
                                      headers: [("Content-Length", "100"), ("Transfer-Encoding", "chunked")], now: now)
            == .start(expectedTotal: nil))
    }

    @Test func partialContentAtTheRequestedOffsetAppends() {
        let headers = [("Content-Range", "bytes 100-199/200"), ("Content-Length", "100")]
        #expect(ResumeDecision.decide(requestedOffset: 100, status: 206, headers: headers, now: now)
            == .append(expectedTotal: 200))
        #expect(ResumeDecision.decide(requestedOffset: 100, status: 206, headers: [("content-range", "bytes 100-199/*")],
                                      now: now) == .append(expectedTotal: nil))
    }

    @Test func partialContentElsewhereDiscards() {
        let wrong = ResumeDecision.decide(requestedOffset: 100, status: 206,
                                          headers: [("Content-Range", "bytes 0-199/200")], now: now)
        guard case .discardAndRetry(let reason) = wrong else {
            Issue.record("expected discardAndRetry, got \(wrong)")
            return
        }
        #expect(reason.contains("100"))
        let missing = ResumeDecision.decide(requestedOffset: 100, status: 206, headers: [], now: now)
        guard case .discardAndRetry = missing else {
            Issue.record("expected discardAndRetry, got \(missing)")
            return
        }
    }

    @Test func okForARangeRequestRestartsWithTheRightReason() {
        let changed = ResumeDecision.decide(requestedOffset: 100, status: 200,
                                            headers: [("Content-Length", "300"), ("ETag", "\"v2\"")], now: now,
                                            sentIfRange: "\"v1\"", url: nil)
        #expect(changed == .restartFromZero(expectedTotal: 300, reason: "resourceChanged"))
        let ignored = ResumeDecision.decide(requestedOffset: 100, status: 200,
                                            headers: [("Content-Length", "300"), ("ETag", "\"v1\"")], now: now,
                                            sentIfRange: "\"v1\"", url: nil)
        #expect(ignored == .restartFromZero(expectedTotal: 300, reason: "rangeNotHonored"))
        let none = ResumeDecision.decide(requestedOffset: 100, status: 200,
                                         headers: [("Content-Length", "300"), ("Accept-Ranges", "none")], now: now)
        #expect(none == .restartFromZero(expectedTotal: 300, reason: "rangeNotHonored"))
        let unknown = ResumeDecision.decide(requestedOffset: 100, status: 200, headers: [("Content-Length", "300")],
                                            now: now)
        #expect(unknown == .restartFromZero(expectedTotal: 300, reason: "resourceChanged"))
    }

    @Test func rangeNotSatisfiable() {
        #expect(ResumeDecision.decide(requestedOffset: 500, status: 416, headers: [("Content-Range", "bytes */500")],
                                      now: now) == .alreadyComplete(total: 500))
        let shorter = ResumeDecision.decide(requestedOffset: 500, status: 416,
                                            headers: [("Content-Range", "bytes */400")], now: now)
        guard case .discardAndRetry = shorter else {
            Issue.record("expected discardAndRetry, got \(shorter)")
            return
        }
        let bare = ResumeDecision.decide(requestedOffset: 500, status: 416, headers: [], now: now)
        guard case .discardAndRetry = bare else {
            Issue.record("expected discardAndRetry, got \(bare)")
            return
        }
        // A bare 416 to an If-Range request whose known length is what we hold: everything is here.
        #expect(ResumeDecision.decide(requestedOffset: 500, status: 416, headers: [], now: now, sentIfRange: "\"e\"",
                                      url: nil, knownTotal: 500) == .alreadyComplete(total: 500))
        // ...but not without the validator (the resource may have changed), nor with another known length.
        for (ifRange, known) in [(nil, 500), ("\"e\"", 600), ("\"e\"", nil)] as [(String?, Int64?)] {
            let other = ResumeDecision.decide(requestedOffset: 500, status: 416, headers: [], now: now, sentIfRange: ifRange,
                                              url: nil, knownTotal: known)
            guard case .discardAndRetry = other else {
                Issue.record("expected discardAndRetry for If-Range \(String(describing: ifRange)), known \(String(describing: known)), got \(other)")
                return
            }
        }
        // Without a Range there is nothing to discard: a plain permanent HTTP error.
        let atZero = ResumeDecision.decide(requestedOffset: 0, status: 416, headers: [], now: now)
        guard case .fail(let error, let transient, _) = atZero else {
            Issue.record("expected fail, got \(atZero)")
            return
        }
        #expect(error.httpStatus == 416)
        #expect(!transient)
    }

    @Test func notFoundIsPermanent() {
        let d = ResumeDecision.decide(requestedOffset: 0, status: 404, headers: [], now: now,
                                      sentIfRange: nil, url: "http://127.0.0.1:8/x")
        let expected = TaskError(code: TaskErrorCode.httpStatus, message: "HTTP 404 Not Found from http://127.0.0.1:8/x",
                                 httpStatus: 404)
        #expect(d == .fail(expected, transient: false, retryAfter: nil))
    }

    @Test func unavailableWithRetryAfterSecondsOrDate() {
        let seconds = ResumeDecision.decide(requestedOffset: 0, status: 503, headers: [("Retry-After", "120")], now: now)
        #expect(seconds == .fail(TaskError(code: TaskErrorCode.serverBusy, message: "HTTP 503 Service Unavailable",
                                           httpStatus: 503), transient: true, retryAfter: 120))
        // 784111777 is Sun, 06 Nov 1994 08:49:37 GMT.
        let date = ResumeDecision.decide(requestedOffset: 0, status: 503,
                                         headers: [("Retry-After", "Sun, 06 Nov 1994 08:49:37 GMT")], now: 784_111_700)
        guard case .fail(_, true, let retryAfter) = date else {
            Issue.record("expected transient fail, got \(date)")
            return
        }
        #expect(retryAfter == 77)
    }

    @Test func tooManyRequestsAndServerErrors() {
        let busy = ResumeDecision.decide(requestedOffset: 0, status: 429, headers: [], now: now)
        #expect(busy == .fail(TaskError(code: TaskErrorCode.serverBusy, message: "HTTP 429 Too Many Requests",
                                        httpStatus: 429), transient: true, retryAfter: nil))
        for (status, code) in [(408, TaskErrorCode.timedOut), (500, TaskErrorCode.httpStatus),
                               (502, TaskErrorCode.httpStatus), (504, TaskErrorCode.timedOut)] {
            guard case .fail(let error, true, nil) = ResumeDecision.decide(requestedOffset: 0, status: status,
                                                                          headers: [], now: now) else {
                Issue.record("\(status) should be transient")
                continue
            }
            #expect(error.code == code)
            #expect(error.httpStatus == status)
        }
        guard case .fail(_, false, _) = ResumeDecision.decide(requestedOffset: 0, status: 403, headers: [], now: now) else {
            Issue.record("403 should be permanent")
            return
        }
    }

    @Test func contentRangeParsing() {
        #expect(ContentRange.parse("bytes 0-99/200") == ContentRange(start: 0, end: 99, total: 200))
        #expect(ContentRange.parse("bytes */200") == ContentRange(start: nil, end: nil, total: 200))
        #expect(ContentRange.parse("bytes 0-99/*") == ContentRange(start: 0, end: 99, total: nil))
        #expect(ContentRange.parse("  Bytes 5-5/6 ") == ContentRange(start: 5, end: 5, total: 6))
        for bad in ["bytes */*", "bytes 9-1/20", "bytes 0-200/200", "items 0-1/2", "bytes 0-/5", "bytes -1/5",
                    "bytes 0-1", "bytes0-1/2", "", "bytes a-b/c"] {
            #expect(ContentRange.parse(bad) == nil, "\(bad)")
        }
    }

    @Test func retryAfterParsing() {
        #expect(RetryAfter.parse("120", now: now) == 120)
        #expect(RetryAfter.parse(" 0 ", now: now) == 0)
        let t = 784_111_777.0
        #expect(RetryAfter.parse("Sun, 06 Nov 1994 08:49:37 GMT", now: t - 10) == 10)
        #expect(RetryAfter.parse("Sunday, 06-Nov-94 08:49:37 GMT", now: t - 10) == 10)
        #expect(RetryAfter.parse("Sun Nov  6 08:49:37 1994", now: t - 10) == 10)
        #expect(RetryAfter.parse("Sun, 06 Nov 1994 08:49:37 GMT", now: t + 50) == 0)
        #expect(RetryAfter.parse("Thu, 01 Jan 2037 00:00:00 GMT", now: 2_114_380_800 - 3) == 3)
        for bad in ["", "soon", "-5", "1.5", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT"] {
            #expect(RetryAfter.parse(bad, now: now) == nil, "\(bad)")
        }
    }

    @Test func rangeHeadersNeedAValidatorAndAnOffset() {
        let strong = Validators(etag: "\"abc\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")
        let headers = ResumeDecision.rangeHeaders(offset: 10, validators: strong)
        #expect(headers.map(\.0) == ["Range", "If-Range"])
        #expect(headers.map(\.1) == ["bytes=10-", "\"abc\""])
        let weak = Validators(etag: "W/\"abc\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(ResumeDecision.rangeHeaders(offset: 10, validators: weak).map(\.1)
            == ["bytes=10-", "Sun, 06 Nov 1994 08:49:37 GMT"])
        #expect(ResumeDecision.rangeHeaders(offset: 10, validators: Validators(etag: "W/\"x\"", lastModified: nil)).isEmpty)
        #expect(ResumeDecision.rangeHeaders(offset: 10, validators: nil).isEmpty)
        #expect(ResumeDecision.rangeHeaders(offset: 0, validators: strong).isEmpty)
    }

    @Test func ifRangeValue() {
        #expect(Validators(etag: "\"a\"", lastModified: "LM").ifRangeValue == "\"a\"")
        #expect(Validators(etag: "W/\"a\"", lastModified: "LM").ifRangeValue == "LM")
        #expect(Validators(etag: nil, lastModified: "LM").ifRangeValue == "LM")
        #expect(Validators(etag: "W/\"a\"", lastModified: nil).ifRangeValue == nil)
        #expect(Validators(etag: nil, lastModified: nil).ifRangeValue == nil)
        #expect(Validators(etag: "", lastModified: "").ifRangeValue == nil)
    }
}
