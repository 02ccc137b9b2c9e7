import Foundation
import HalfTunesEngine
import HalfTunesProtocol
import NIOConcurrencyHelpers
import TestOrigin
import Testing

/// Records an exchange's progress calls.
final class ExchangeRecorder: AttemptObserver {
    struct State {
        var opened: [Int64] = []
        var sent: [(total: Int64, expected: Int64?)] = []
        var received: [Int64] = []
    }

    let state = NIOLockedValueBox(State())

    func attemptDidCheckpoint(_ attempt: Attempt, durable: ByteRanges) {}

    func attemptDidOpenBody(_ attempt: Attempt, bytesExpectedToSend: Int64) {
        state.withLockedValue { $0.opened.append(bytesExpectedToSend) }
    }

    func attemptDidSend(_ attempt: Attempt, bytes: Int64, totalBytes: Int64, totalBytesExpected: Int64?) {
        state.withLockedValue { $0.sent.append((totalBytes, totalBytesExpected)) }
    }

    func attemptDidReceive(_ attempt: Attempt, bytes: Int64, totalBytes: Int64, totalBytesExpected: Int64?) {
        state.withLockedValue { $0.received.append(totalBytes) }
    }
}

@Suite("Exchanges against the test origin")
struct ExchangeTests {
    func upload(_ fixture: EngineFixture, file: String, to url: String, method: String = "PUT", timeout: Double = 30,
                limiter: RateLimiter? = nil, recorder: ExchangeRecorder = ExchangeRecorder()) -> Attempt {
        var request = AttemptRequest(taskID: 1, url: url, method: method, body: .init(path: file), sink: .memory(.upload),
                                     requestTimeout: timeout)
        request.rateLimiter = limiter
        return Attempt(request: request, client: fixture.client, observer: recorder, logger: fixture.logger)
    }

    @Test func aPutRedirectedWith302SendsTheWholeBodyAgainToTheNewPlace() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 1 << 20, seed: 60)
            try writeFile(f.dir.path("body"), body)
            var redirect = TestOrigin.Behavior()
            redirect.redirectTo = "/new"
            f.origin.setBehavior("/old", redirect)
            f.origin.acceptUploads("/new")
            let recorder = ExchangeRecorder()
            let outcome = await upload(f, file: f.dir.path("body"), to: f.origin.url("/old"), recorder: recorder).run()
            guard case .responded(let response) = outcome else {
                Issue.record("unexpected \(outcome)")
                return
            }
            #expect(response.status == 201)
            #expect(f.origin.uploads("/new").map(\.sha256) == [TestOrigin.sha256Hex(body)])
            #expect(f.origin.requests("/new").first?.method == "PUT")
            let state = recorder.state.withLockedValue { $0 }
            #expect(state.opened == [Int64(body.count)])
            #expect(state.sent.last?.total == Int64(body.count))
        }
    }

    @Test func aServerThatNeverAnswersTimesOut() async throws {
        try await EngineFixture.with { f in
            let silent = try SilentListener()
            try writeFile(f.dir.path("body"), TestOrigin.randomBytes(count: 64 << 10, seed: 61))
            let outcome = await upload(f, file: f.dir.path("body"), to: silent.url("/x"), timeout: 0.5).run()
            guard case let .failed(failure, response) = outcome else {
                Issue.record("unexpected \(outcome)")
                return
            }
            #expect(failure.error.code == TaskErrorCode.timedOut)
            #expect(failure.isTransient)
            #expect(response == nil)
        }
    }

    @Test func stopEndsAnUploadAtOnce() async throws {
        try await EngineFixture.with { f in
            try writeFile(f.dir.path("body"), TestOrigin.randomBytes(count: 4 << 20, seed: 62))
            f.origin.acceptUploads("/slow")
            let limiter = RateLimiter(buckets: [BandwidthBucket(rate: 256 << 10)])
            let exchange = upload(f, file: f.dir.path("body"), to: f.origin.url("/slow"), limiter: limiter)
            async let outcome = exchange.run()
            try await waitUntil("some bytes at the origin") { f.origin.uploadBytesReceived("/slow") > 0 }
            exchange.stop()
            #expect(await outcome == .stopped(durableBytes: 0))
            #expect(f.origin.uploads("/slow").allSatisfy { !$0.complete })
        }
    }

    @Test func aMissingSourceFailsPermanently() async throws {
        try await EngineFixture.with { f in
            let outcome = await upload(f, file: f.dir.path("gone"), to: f.origin.url("/x")).run()
            guard case let .failed(failure, _) = outcome else {
                Issue.record("unexpected \(outcome)")
                return
            }
            #expect(failure.error.code == TaskErrorCode.sourceUnreadable)
            #expect(!failure.isTransient)
            #expect(f.origin.requests().isEmpty)
        }
    }
}
