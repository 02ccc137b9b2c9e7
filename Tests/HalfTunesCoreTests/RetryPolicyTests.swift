// Unit tests: backoff with injected jitter, maxAttempts, Retry-After clamping, policy validation, status classes.
import HalfTunesCore
import HalfTunesProtocol
import Testing

@Suite("Retry policy and backoff")
struct RetryPolicyTests {
    typealias M = TaskStateMachine
    let lost = TaskError(code: TaskErrorCode.connectionLost, message: "Connection to h:1 lost: reset")

    /// Fails a running machine transiently and returns the delay it chose (it is then running again).
    func failAndRetry(_ m: inout M, now: Double, retryAfter: Double? = nil, sample: Double,
                      error: TaskError? = nil) throws -> Double? {
        _ = try m.handle(.transferFailed(error ?? lost, transient: true, retryAfter: retryAfter, jitterSample: sample),
                         now: now)
        guard m.state == .waiting, let at = m.nextAttemptAt else { return nil }
        _ = try m.handle(.retryDue, now: at)
        _ = try m.handle(.slotGranted, now: at)
        return at - now
    }

    @Test func defaultsComeFromRetryPolicy() {
        let b = Backoff(nil)
        #expect(b == Backoff(initial: 1, maximum: 300, jitter: 0.2, maximumRetryAfter: 3600, maxAttempts: nil))
        #expect(b.policy == RetryPolicy(initialDelay: 1, maxDelay: 300, jitter: 0.2, maxRetryAfter: 3600))
        // A long first delay raises the default maximum instead of contradicting it.
        #expect(Backoff(RetryPolicy(initialDelay: 600)).maximum == 600)
        #expect(Backoff(RetryPolicy(initialDelay: 0.05, maxAttempts: 4)).maxAttempts == 4)
    }

    @Test func jitterStaysWithinItsBoundsAndIsDeterministic() {
        let b = Backoff(initial: 10, maximum: 1000, jitter: 0.2)
        #expect(b.delay(failures: 1, retryAfter: nil, jitterSample: 0) == 8)
        #expect(b.delay(failures: 1, retryAfter: nil, jitterSample: 0.5) == 10)
        #expect(b.delay(failures: 1, retryAfter: nil, jitterSample: 0.75) == 11)
        for failures in 1...12 {
            let base = min(1000, 10 * Double(1 << (failures - 1)))
            for k in 0..<100 {
                let sample = Double(k) / 100
                let d = b.delay(failures: failures, retryAfter: nil, jitterSample: sample)
                #expect(d >= base * 0.8 && d < base * 1.2, "failures \(failures) sample \(sample): \(d)")
                #expect(d == b.delay(failures: failures, retryAfter: nil, jitterSample: sample))
            }
        }
        // Out-of-range samples are clamped, never widen the bounds.
        #expect(b.delay(failures: 1, retryAfter: nil, jitterSample: -3) == 8)
        #expect(abs(b.delay(failures: 1, retryAfter: nil, jitterSample: 7) - 12) < 1e-9)
        #expect(b.delay(failures: 1, retryAfter: nil, jitterSample: .nan) == 10)
        // No jitter: exactly the exponential sequence, capped before jitter.
        let plain = Backoff(initial: 1, maximum: 60, jitter: 0)
        #expect((1...9).map { plain.delay(failures: $0, retryAfter: nil, jitterSample: 0.9) }
            == [1, 2, 4, 8, 16, 32, 60, 60, 60])
        #expect(plain.delay(failures: 10_000, retryAfter: nil, jitterSample: 0.1) == 60)
    }

    @Test func theMachineUsesTheInjectedSampleAndTheSessionsPolicy() throws {
        var m = M(state: .running, backoff: Backoff(initial: 0.05, maximum: 0.4, jitter: 0.5))
        var delays: [Double] = []
        for sample in [0.0, 0.5, 0.99, 0.5, 0.0] {
            delays.append(try #require(try failAndRetry(&m, now: 1000, sample: sample)))
        }
        let expected = [0.025, 0.1, 0.2 * 1.49, 0.4, 0.2]
        for (d, e) in zip(delays, expected) { #expect(abs(d - e) < 1e-9, "\(delays)") }
        // The daemon replaces the policy when the session is re-opened with another one.
        m.backoff = Backoff(initial: 7, maximum: 7, jitter: 0)
        #expect(try failAndRetry(&m, now: 0, sample: 0.3) == 7)
    }

    @Test func retryAfterIsALowerBoundClampedByMaxRetryAfter() throws {
        let b = Backoff(initial: 1, maximum: 300, jitter: 0.2, maximumRetryAfter: 100)
        for k in 0..<20 {
            let sample = Double(k) / 20
            // Never sooner than Retry-After...
            #expect(b.delay(failures: 1, retryAfter: 30, jitterSample: sample) == 30)
            // ...but never longer than maxRetryAfter...
            #expect(b.delay(failures: 1, retryAfter: 5000, jitterSample: sample) == 100)
            // ...and a short Retry-After does not shorten a longer backoff.
            let computed = b.delay(failures: 9, retryAfter: nil, jitterSample: sample)
            #expect(b.delay(failures: 9, retryAfter: 2, jitterSample: sample) == computed)
        }
        // An HTTP-date in the past (0 s) or garbage (nil) leaves the computed delay.
        #expect(b.delay(failures: 1, retryAfter: 0, jitterSample: 0.5) == 1)
        var m = M(state: .running, backoff: b)
        #expect(try failAndRetry(&m, now: 50, retryAfter: 99_999, sample: 0.1) == 100)
        // maxRetryAfter 0 ignores Retry-After altogether.
        let ignoring = Backoff(initial: 1, maximum: 1, jitter: 0, maximumRetryAfter: 0)
        #expect(ignoring.delay(failures: 1, retryAfter: 3600, jitterSample: 0.5) == 1)
    }

    @Test func maxAttemptsFailsWithTheLastErrorAfterThatManyFailuresInARow() throws {
        var m = M(state: .running, backoff: Backoff(initial: 1, maximum: 1, jitter: 0, maxAttempts: 3))
        #expect(try failAndRetry(&m, now: 0, sample: 0.5) == 1)
        #expect(try failAndRetry(&m, now: 10, sample: 0.5) == 1)
        // progress starts the count again
        _ = try m.handle(.madeProgress, now: 11)
        #expect(m.consecutiveFailures == 0)
        #expect(try failAndRetry(&m, now: 20, sample: 0.5) == 1)
        #expect(try failAndRetry(&m, now: 30, sample: 0.5) == 1)
        let busy = TaskError(code: TaskErrorCode.serverBusy, message: "HTTP 503 Service Unavailable from u", httpStatus: 503)
        let actions = try m.handle(.transferFailed(busy, transient: true, retryAfter: 5, jitterSample: 0.5), now: 40)
        #expect(m.state == .failed)
        let error = try #require(m.error)
        #expect(error.code == TaskErrorCode.serverBusy)
        #expect(error.httpStatus == 503)
        #expect(error.message.hasPrefix("Gave up after 3 attempts in a row without progress"))
        #expect(error.message.hasSuffix(busy.message))
        #expect(actions == [.discardPartial, .emitStateChanged(from: .running, to: .failed, reason: error),
                            .emitComplete(error: error)])

        var once = M(state: .running, backoff: Backoff(maxAttempts: 1))
        _ = try once.handle(.transferFailed(lost, transient: true, retryAfter: nil), now: 0)
        #expect(once.state == .failed)
        #expect(once.error?.message.hasPrefix("Gave up after 1 attempt without progress") == true)
        // Without maxAttempts only the resource deadline ends retrying.
        var forever = M(state: .running, backoff: Backoff(initial: 1, maximum: 1, jitter: 0))
        for i in 0..<200 { #expect(try failAndRetry(&forever, now: Double(i) * 10, sample: 0.5) == 1) }
    }

    @Test func validationNamesTheFieldAndTheRange() {
        func problem(_ p: RetryPolicy) -> String? { Backoff.problem(with: p) }
        #expect(problem(RetryPolicy()) == nil)
        #expect(problem(RetryPolicy(initialDelay: 0.05, maxDelay: 0.2, jitter: 0, maxRetryAfter: 0, maxAttempts: 1)) == nil)
        #expect(problem(RetryPolicy(initialDelay: 0)) == "configuration.retry.initialDelay must be more than 0 and at most 86400 seconds (got 0.0)")
        #expect(problem(RetryPolicy(initialDelay: -1))?.contains("initialDelay") == true)
        #expect(problem(RetryPolicy(initialDelay: .infinity))?.contains("initialDelay") == true)
        #expect(problem(RetryPolicy(maxDelay: 100_000))?.contains("configuration.retry.maxDelay must be") == true)
        #expect(problem(RetryPolicy(initialDelay: 10, maxDelay: 5))
            == "configuration.retry.maxDelay (5.0) must not be less than initialDelay (10.0)")
        #expect(problem(RetryPolicy(maxDelay: 0.5))?.contains("the default") == true)
        #expect(problem(RetryPolicy(jitter: 1.5)) == "configuration.retry.jitter must be from 0 to 1 (got 1.5)")
        #expect(problem(RetryPolicy(jitter: -0.1)) != nil)
        #expect(problem(RetryPolicy(maxRetryAfter: -1))?.contains("maxRetryAfter must be from 0 to 604800") == true)
        #expect(problem(RetryPolicy(maxAttempts: 0))?.contains("maxAttempts must be at least 1") == true)
    }

    @Test func statusClasses() {
        for status in [408, 429, 500, 502, 503, 504, 507, 509, 520, 521, 522, 523, 524, 599] {
            #expect(ResumeDecision.isTransient(status: status), "\(status)")
        }
        for status in [300, 304, 400, 401, 403, 404, 405, 410, 411, 412, 413, 414, 418, 451, 501, 505, 506, 508, 510, 511] {
            #expect(!ResumeDecision.isTransient(status: status), "\(status)")
        }
        #expect(ResumeDecision.errorCode(status: 429) == TaskErrorCode.serverBusy)
        #expect(ResumeDecision.errorCode(status: 503) == TaskErrorCode.serverBusy)
        #expect(ResumeDecision.errorCode(status: 408) == TaskErrorCode.timedOut)
        #expect(ResumeDecision.errorCode(status: 504) == TaskErrorCode.timedOut)
        #expect(ResumeDecision.errorCode(status: 500) == TaskErrorCode.httpStatus)
        #expect(ResumeDecision.errorCode(status: 404) == TaskErrorCode.httpStatus)
        let gone = ResumeDecision.decide(requestedOffset: 0, status: 410, headers: [("Retry-After", "5")], now: 0,
                                         sentIfRange: nil, url: "http://h/x")
        #expect(gone == .fail(TaskError(code: TaskErrorCode.httpStatus, message: "HTTP 410 Gone from http://h/x",
                                        httpStatus: 410), transient: false, retryAfter: 5))
    }
}
