// ResourceVersion and the version check of ResumeDecision: a 206 or 416 that continues kept bytes must name
// exactly their version (no I/O).
import HalfTunesCore
import HalfTunesProtocol
import Testing

@Suite struct ResourceVersionTests {
    let lm = "Sat, 22 Nov 2025 03:51:27 GMT"
    var kept: ResourceVersion { ResourceVersion(validators: Validators(etag: "\"v1\"", lastModified: lm), total: 200) }

    func resume(_ status: Int, _ headers: [(String, String)], kept: ResourceVersion? = nil) -> ResumeDecision {
        ResumeDecision.decide(requestedOffset: 100, status: status, headers: headers, now: 0, sentIfRange: "\"v1\"",
                              url: "http://h/f", knownTotal: 200, kept: kept ?? self.kept)
    }

    @Test func weakETagsAreNoValidators() {
        #expect(ResourceVersion(etag: "W/\"x\"", lastModified: nil, total: nil).etag == nil)
        #expect(ResourceVersion(etag: " \"x\" ", lastModified: " ", total: nil) == ResourceVersion(etag: "\"x\"", lastModified: nil, total: nil))
        let weakKept = ResourceVersion(validators: Validators(etag: "W/\"x\"", lastModified: lm), total: 10)
        #expect(weakKept.mismatch(ResourceVersion(etag: "W/\"y\"", lastModified: lm, total: 10)) == nil)
        #expect(weakKept.mismatch(ResourceVersion(etag: nil, lastModified: lm, total: 10)) == nil)
        #expect(weakKept.mismatch(ResourceVersion(etag: nil, lastModified: lm, total: 11)) != nil)
    }

    /// An ETag with bytes replaced (U+FFFD: HTTP/2 fields that were not UTF-8) could stand for any bytes: it
    /// counts as weak, so Last-Modified and the length decide, and a 206 without Last-Modified is not vouched for.
    /// A Latin-1 one (an HTTP/1 head, read by ResponseHeadRecoder) is a validator like any other.
    @Test func anETagWithBytesReplacedIsNoValidator() {
        #expect(ResourceVersion.strongETag("\"v\u{FFFD}\"") == nil)
        #expect(ResourceVersion.strongETag(" \"vä\" ") == "\"vä\"")
        #expect(Validators(etag: "\"v\u{FFFD}\"", lastModified: lm).ifRangeValue == lm)
        #expect(Validators(etag: "\"vä\"", lastModified: lm).ifRangeValue == "\"vä\"")
        let replaced = ResourceVersion(validators: Validators(etag: "\"v\u{FFFD}\"", lastModified: lm), total: 200)
        #expect(replaced.etag == nil)
        #expect(replaced.mismatch(ResourceVersion(etag: "\"v\u{FFFD}\"", lastModified: nil, total: 200)) != nil, "nothing vouches")
        #expect(replaced.mismatch(ResourceVersion(etag: "\"v\u{FFFD}\"", lastModified: lm, total: 200)) == nil)
        let latin = ResourceVersion(etag: "\"vä\"", lastModified: lm, total: 200)
        #expect(latin.mismatch(ResourceVersion(etag: "\"vå\"", lastModified: lm, total: 200)) != nil)
    }

    @Test func everyKeptPartMustComeBackEqual() {
        let same = ResourceVersion(etag: "\"v1\"", lastModified: lm, total: 200)
        #expect(kept.mismatch(same) == nil)
        #expect(kept.mismatch(ResourceVersion(etag: "\"v2\"", lastModified: lm, total: 200)) == "the ETag is now \"v2\", not \"v1\"")
        #expect(kept.mismatch(ResourceVersion(etag: "W/\"v1\"", lastModified: lm, total: 200)) != nil)
        #expect(kept.mismatch(ResourceVersion(etag: nil, lastModified: lm, total: 200)) != nil)
        // A 206 need not repeat Last-Modified (RFC 9110 15.3.7): the same strong ETag vouches for the bytes.
        #expect(kept.mismatch(ResourceVersion(etag: "\"v1\"", lastModified: nil, total: 200)) == nil)
        let dateOnly = ResourceVersion(validators: Validators(etag: "W/\"w\"", lastModified: lm), total: 200)
        #expect(dateOnly.mismatch(ResourceVersion(etag: "W/\"w\"", lastModified: nil, total: 200)) != nil, "nothing vouches")
        #expect(kept.mismatch(ResourceVersion(etag: "\"v1\"", lastModified: "Sun, 23 Nov 2025 00:00:00 GMT", total: 200)) != nil)
        #expect(kept.mismatch(ResourceVersion(etag: "\"v1\"", lastModified: lm, total: 201)) == "the length is now 201 bytes, not 200")
        #expect(kept.mismatch(ResourceVersion(etag: "\"v1\"", lastModified: lm, total: nil)) != nil)
        // What was not kept is not asked for.
        #expect(ResourceVersion(etag: "\"v1\"", lastModified: nil, total: nil).mismatch(same) == nil)
        // Partial (a 416): what the response leaves out is not held against it; what it gives must match.
        #expect(kept.mismatch(ResourceVersion(etag: nil, lastModified: nil, total: 200), partial: true) == nil)
        #expect(kept.mismatch(ResourceVersion(etag: "\"v2\"", lastModified: nil, total: 200), partial: true) != nil)
        #expect(kept.mismatch(ResourceVersion(etag: nil, lastModified: nil, total: 100), partial: true) != nil)
    }

    @Test func aResponseNamesItsVersionByStatus() {
        #expect(ResourceVersion.of(status: 206, headers: [("Content-Range", "bytes 1-2/30"), ("Content-Length", "2"),
                                                          ("ETag", "\"a\""), ("Last-Modified", lm)])
                == ResourceVersion(etag: "\"a\"", lastModified: lm, total: 30))
        #expect(ResourceVersion.of(status: 416, headers: [("Content-Range", "bytes */30")]).total == 30)
        #expect(ResourceVersion.of(status: 200, headers: [("Content-Length", "30")]).total == 30)
        #expect(ResourceVersion.of(status: 206, headers: [("Content-Range", "bytes 1-2/*")]).total == nil)
    }

    /// A server that ignores If-Range (BusyBox httpd) answers 206 for a changed file: the resume must not append.
    @Test func aResumed206OfAnotherVersionIsAChangeNotAnAppend() {
        let sameVersion = [("Content-Range", "bytes 100-199/200"), ("Content-Length", "100"), ("ETag", "\"v1\""), ("Last-Modified", lm)]
        #expect(resume(206, sameVersion) == .append(expectedTotal: 200))
        #expect(resume(206, [("Content-Range", "bytes 100-199/200"), ("ETag", "\"v1\"")]) == .append(expectedTotal: 200),
                "the same strong ETag without Last-Modified")
        let others: [[(String, String)]] = [
            [("Content-Range", "bytes 100-199/200"), ("ETag", "\"v2\""), ("Last-Modified", lm)],
            [("Content-Range", "bytes 100-199/200"), ("ETag", "\"v1\""), ("Last-Modified", "Sun, 23 Nov 2025 00:00:00 GMT")],
            [("Content-Range", "bytes 100-199/200"), ("Last-Modified", lm)],
            [("Content-Range", "bytes 100-199/200"), ("ETag", "W/\"v1\""), ("Last-Modified", lm)],
            [("Content-Range", "bytes 100-299/300"), ("ETag", "\"v1\""), ("Last-Modified", lm)],
            [("Content-Range", "bytes 100-199/*"), ("ETag", "\"v1\""), ("Last-Modified", lm)],
        ]
        for headers in others {
            guard case .changed(let reason) = resume(206, headers) else {
                Issue.record("\(headers) → \(resume(206, headers))")
                continue
            }
            #expect(reason.contains("another version"))
        }
        // Without a kept version (older callers, or nothing to compare) the 206 appends as before.
        #expect(ResumeDecision.decide(requestedOffset: 100, status: 206, headers: [("Content-Range", "bytes 100-199/200")],
                                      now: 0) == .append(expectedTotal: 200))
    }

    @Test func a416ThatSaysAllIsHereMustNotNameAnotherVersion() {
        #expect(resume(416, [("Content-Range", "bytes */100")], kept: ResourceVersion(validators: Validators(etag: "\"v1\"", lastModified: lm), total: 100))
                == .alreadyComplete(total: 100))
        guard case .changed = resume(416, [("Content-Range", "bytes */100"), ("ETag", "\"v2\"")],
                                     kept: ResourceVersion(validators: Validators(etag: "\"v1\"", lastModified: lm), total: 100)) else {
            Issue.record("a 416 with another ETag was taken as complete")
            return
        }
        guard case .changed = resume(416, [("Content-Range", "bytes */100")]) else {
            Issue.record("a 416 with another length than the kept bytes' was not a change")
            return
        }
    }
}
