import Foundation
import HalfTunesCore
import HalfTunesProtocol
import Testing

@Suite("Exchange rules (uploads and data tasks)")
struct ExchangeRulesTests {
    @Test func uploadResponsesKeepTheirBeginningAndSayTheyWereTruncated() {
        var collector = ResponseCollector(limit: ResponseLimit(maxBytes: 4, overflow: .truncate))
        let accepted = [collector.append(Array("ab".utf8)), collector.append(Array("cdef".utf8)),
                        collector.append(Array("gh".utf8))]
        #expect(accepted == [true, true, true])
        #expect(collector.kept == Array("abcd".utf8))
        #expect(collector.total == 8)
        let response = collector.response(status: 201, headers: [("Server", "x")])
        #expect(response.status == 201)
        #expect(response.headers == [["Server", "x"]])
        #expect(response.body == Data("abcd".utf8).base64EncodedString())
        #expect(response.bodyBytes == 8)
        #expect(response.truncated)
    }

    @Test func dataResponsesOverTheCapStopAndKeepNoBody() {
        var collector = ResponseCollector(limit: .data(maxBytes: 5))
        let withinCap = collector.append(Array("12345".utf8))
        #expect(withinCap)
        #expect(!collector.isOverLimit)
        #expect(collector.response(status: 200, headers: []).body == Data("12345".utf8).base64EncodedString())
        let overCap = collector.append(Array("6".utf8))
        #expect(!overCap)
        let response = collector.response(status: 200, headers: [])
        #expect(response.body == nil)
        #expect(response.truncated)
        #expect(response.bodyBytes == 6)
    }

    @Test func anEmptyBodyHasNoBodyField() {
        let response = ResponseCollector(limit: .upload).response(status: 204, headers: [])
        #expect(response.body == nil)
        #expect(response.bodyBytes == 0)
        #expect(!response.truncated)
    }

    @Test func dataLimitsAreClampedTo16MiB() {
        #expect(ResponseLimit.data(maxBytes: nil).maxBytes == 16 << 20)
        #expect(ResponseLimit.data(maxBytes: 1 << 40).maxBytes == 16 << 20)
        #expect(ResponseLimit.data(maxBytes: 100).maxBytes == 100)
        #expect(ResponseLimit.upload == ResponseLimit(maxBytes: 64 << 10, overflow: .truncate))
    }

    @Test func methodsPerKind() throws {
        #expect(try ExchangeRules.method(nil, kind: .upload).get() == "PUT")
        #expect(try ExchangeRules.method("post", kind: .upload).get() == "POST")
        #expect(try ExchangeRules.method(nil, kind: .data).get() == "GET")
        #expect(try ExchangeRules.method("Head", kind: .data).get() == "HEAD")
        for (method, kind) in [("GET", TaskKind.upload), ("DELETE", .upload), ("PUT", .data), ("POST", .data), ("", .data)] {
            guard case .failure(let refusal) = ExchangeRules.method(method, kind: kind) else {
                Issue.record("\(method) accepted for \(kind)")
                continue
            }
            #expect(refusal.message.contains("not supported for \(kind.rawValue) tasks"))
        }
    }

    @Test func aContentLengthOverADataTasksCapIsRefusedAtTheHead() {
        let limit = ResponseLimit.data(maxBytes: 1000)
        let refusal = ExchangeRules.refusal(status: 200, headers: [("Content-Length", "1001")], method: "GET",
                                            limit: limit, url: "http://h/x")
        #expect(refusal?.code == TaskErrorCode.responseTooLarge)
        #expect(refusal?.message.contains("1001 bytes") == true)
        #expect(ExchangeRules.refusal(status: 200, headers: [("Content-Length", "1000")], method: "GET",
                                      limit: limit, url: "u") == nil)
        // HEAD's Content-Length describes a body that is not sent; uploads truncate instead of failing.
        #expect(ExchangeRules.refusal(status: 200, headers: [("Content-Length", "9999")], method: "HEAD",
                                      limit: limit, url: "u") == nil)
        #expect(ExchangeRules.refusal(status: 200, headers: [("Content-Length", "999999")], method: "PUT",
                                      limit: .upload, url: "u") == nil)
    }

    @Test func statusesAreClassifiedLikeDownloads() {
        let response = TaskResponse(status: 0, body: nil, bodyBytes: 0, truncated: false)
        func outcome(_ status: Int, _ headers: [(String, String)] = []) -> AttemptOutcome {
            ExchangeRules.outcome(status: status, headers: headers, response: response, now: 1_000_000, url: "http://h/x")
        }
        for status in [200, 201, 204, 206] {
            #expect(outcome(status) == .responded(response), "\(status)")
        }
        for status in [408, 429, 500, 502, 503, 504] {
            guard case let .failed(failure, kept) = outcome(status) else {
                Issue.record("\(status) did not fail")
                continue
            }
            #expect(failure.isTransient, "\(status)")
            #expect(failure.error.httpStatus == status)
            #expect(kept == response)
        }
        for status in [400, 401, 403, 404, 405, 410, 413, 416, 304, 300] {
            guard case let .failed(failure, kept) = outcome(status) else {
                Issue.record("\(status) did not fail")
                continue
            }
            #expect(!failure.isTransient, "\(status)")
            #expect(failure.error.code == TaskErrorCode.httpStatus, "\(status)")
            #expect(failure.error.httpStatus == status)
            #expect(kept == response)
        }
        guard case let .failed(busy, _) = outcome(503, [("Retry-After", "120")]) else {
            Issue.record("503 did not fail")
            return
        }
        #expect(busy.error.code == TaskErrorCode.serverBusy)
        #expect(busy.retryAfter == 120)
    }
}
