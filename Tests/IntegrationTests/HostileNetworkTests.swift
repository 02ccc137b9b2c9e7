// The origin's fault menu through the real daemon: drops, stalls, busy servers, bad ranges, changes, redirects.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Every fault ends in the origin's current content (checked by SHA-256) or in the expected error; never a
/// hang (every wait has a deadline), never a mixed file.
@Suite("Hostile networks and servers")
struct HostileNetworkTests {
    @Test func dropsResumeFromTheDurableOffsetWithIfRangeEveryTime() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 2 * MiB + 77, seed: 501)
            origin.put("/drop.bin", body)
            var drop = TestOrigin.Behavior()
            drop.dropAfterBytes = 300_000
            drop.dropTimes = 3
            origin.setBehavior("/drop.bin", drop)
            let client = try daemon.client()
            let events = try client.openHostileSession("drop")
            let t = try client.startTask(origin.url("/drop.bin"), session: "drop")
            let done = try client.waitFor(task: t.id, state: .completed)
            try events.waitForDidComplete(t.id)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let etag = try #require(origin.validators("/drop.bin")?.etag)
            let requests = origin.requests("/drop.bin")
            #expect(requests.count == 4)
            #expect(requests.first?.range == nil)
            for (i, request) in requests.enumerated().dropFirst() {
                #expect(request.range == "bytes=\(300_000 * i)-", "attempt \(i + 1)")
                #expect(request.ifRange == etag)
                #expect(request.status == 206)
            }
            #expect(origin.bytesServed("/drop.bin") == Int64(body.count), "no byte fetched twice")
            #expect(events.waitingReasons(task: t.id).map(\.code) == Array(repeating: TaskErrorCode.connectionLost, count: 3))
            #expect(done.attempts == 4)
            #expect(partialFiles(in: daemon.downloadsDir).isEmpty)
        }
    }

    @Test func aStalledServerHitsTheIdleTimeoutAndTheRetryResumes() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: MiB, seed: 502)
            origin.put("/stall.bin", body)
            var stall = TestOrigin.Behavior()
            stall.stallAfterBytes = 100_000
            stall.stallTimes = 1
            origin.setBehavior("/stall.bin", stall)
            let client = try daemon.client()
            let events = try client.openHostileSession("stall", requestTimeout: 0.5)
            let t = try client.startTask(origin.url("/stall.bin"), session: "stall")
            let done = try client.waitFor(task: t.id, state: .completed)
            try events.waitForDidComplete(t.id)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let reasons = events.waitingReasons(task: t.id)
            #expect(reasons.map(\.code) == [TaskErrorCode.timedOut])
            #expect(reasons.first?.message.contains("within the request timeout") == true)
            let requests = origin.requests("/stall.bin")
            #expect(requests.count == 2)
            #expect(requests.last?.range == "bytes=100000-")
            #expect(requests.last?.status == 206)
        }
    }

    /// 503 twice with `Retry-After: 1`: the task waits with `serverBusy` and each retry comes at least a second
    /// later, although the session's own backoff is 50 ms. Then an HTTP-date Retry-After, and a 429.
    @Test func busyServersAreWaitedForAsLongAsRetryAfterSays() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 200_000, seed: 503)
            for path in ["/busy.bin", "/date.bin", "/slow-down.bin"] { origin.put(path, body) }
            var busy = TestOrigin.Behavior()
            busy.failStatus = 503
            busy.failTimes = 2
            busy.retryAfter = "1"
            origin.setBehavior("/busy.bin", busy)
            let client = try daemon.client()
            let events = try client.openHostileSession("busy")
            let t = try client.startTask(origin.url("/busy.bin"), session: "busy")
            let done = try client.waitFor(task: t.id, state: .completed)
            try events.waitForDidComplete(t.id)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let reasons = events.waitingReasons(task: t.id)
            #expect(reasons.map(\.code) == [TaskErrorCode.serverBusy, TaskErrorCode.serverBusy])
            #expect(reasons.allSatisfy { $0.httpStatus == 503 })
            let requests = origin.requests("/busy.bin")
            #expect(requests.map(\.status) == [503, 503, 200])
            for i in 1..<requests.count {
                let gap = requests[i].arrivedAt - requests[i - 1].arrivedAt
                #expect(gap >= 1.0, "retry \(i) came \(gap) s after the 503 that said Retry-After: 1")
            }

            // Retry-After as an HTTP-date: no retry before that time.
            let retryAt = floor(Date().timeIntervalSince1970) + 2
            var dated = TestOrigin.Behavior()
            dated.failStatus = 503
            dated.retryAfter = httpDate(retryAt)
            origin.setBehavior("/date.bin", dated)
            let d = try client.startTask(origin.url("/date.bin"), session: "busy")
            try client.waitFor(task: d.id, state: .completed)
            let dateRequests = origin.requests("/date.bin")
            #expect(dateRequests.count == 2)
            #expect((dateRequests.last?.arrivedAt ?? 0) >= retryAt)

            var tooMany = TestOrigin.Behavior()
            tooMany.failStatus = 429
            origin.setBehavior("/slow-down.bin", tooMany)
            let s = try client.startTask(origin.url("/slow-down.bin"), session: "busy")
            let slowDone = try client.waitFor(task: s.id, state: .completed)
            try events.waitForDidComplete(s.id)
            #expect(try sha256(ofFile: slowDone.location!) == TestOrigin.sha256Hex(body))
            #expect(events.waitingReasons(task: s.id).map { "\($0.code) \($0.httpStatus ?? 0)" } == ["serverBusy 429"])
        }
    }

    /// `retry.maxAttempts`: after that many failures in a row the task fails with the last error; 404 and 501
    /// fail at once; an unreachable origin waits with `connectionRefused`.
    @Test func permanentErrorsFailAtOnceAndMaxAttemptsGivesUp() async throws {
        try await withDaemon { daemon, origin in
            origin.put("/always-busy.bin", TestOrigin.randomBytes(count: 1000, seed: 504))
            origin.put("/not-implemented.bin", TestOrigin.randomBytes(count: 1000, seed: 505))
            var busy = TestOrigin.Behavior()
            busy.failStatus = 503
            busy.failTimes = 1000
            origin.setBehavior("/always-busy.bin", busy)
            var notImplemented = TestOrigin.Behavior()
            notImplemented.failStatus = 501
            origin.setBehavior("/not-implemented.bin", notImplemented)
            let client = try daemon.client()
            let events = try client.openHostileSession("giveup", retry: RetryPolicy(initialDelay: 0.05, maxDelay: 0.1,
                                                                                     maxAttempts: 3))
            let t = try client.startTask(origin.url("/always-busy.bin"), session: "giveup")
            let failed = try client.waitForEnd(t.id)
            try events.waitForDidComplete(t.id)
            #expect(failed.state == .failed)
            #expect(failed.error?.code == TaskErrorCode.serverBusy)
            #expect(failed.error?.httpStatus == 503)
            #expect(failed.error?.message.hasPrefix("Gave up after 3 attempts in a row without progress") == true)
            #expect(origin.requests("/always-busy.bin").count == 3)
            #expect(events.waitingReasons(task: t.id).count == 2)

            for (path, status) in [("/missing.bin", 404), ("/not-implemented.bin", 501)] {
                let task = try client.startTask(origin.url(path), session: "giveup")
                let end = try client.waitForEnd(task.id)
                try events.waitForDidComplete(task.id)
                #expect(end.state == .failed, "\(path)")
                #expect(end.error?.code == TaskErrorCode.httpStatus)
                #expect(end.error?.httpStatus == status)
                #expect(end.attempts == 1)
                #expect(origin.requests(path).count == 1)
                #expect(events.waitingReasons(task: task.id).isEmpty)
            }

            let closed = try await TestOrigin.start()
            let unreachable = closed.url("/gone.bin")
            try await closed.shutdown()
            let r = try client.startTask(unreachable, session: "giveup")
            let refused = try client.waitForEnd(r.id)
            try events.waitForDidComplete(r.id)
            #expect(refused.error?.code == TaskErrorCode.connectionRefused)
            #expect(events.waitingReasons(task: r.id).map(\.code) == [TaskErrorCode.connectionRefused,
                                                                      TaskErrorCode.connectionRefused])
            #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.downloadsDir).isEmpty)
        }
    }

    @Test func aServerThatIgnoresRangeRestartsFromZeroCleanly() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: MiB + 3, seed: 506)
            origin.put("/norange.bin", body)
            var b = TestOrigin.Behavior()
            b.ignoreRange = true
            b.dropAfterBytes = 500_000
            origin.setBehavior("/norange.bin", b)
            let client = try daemon.client()
            let events = try client.openHostileSession("norange")
            let t = try client.startTask(origin.url("/norange.bin"), session: "norange")
            let done = try client.waitFor(task: t.id, state: .completed)
            try events.waitForDidComplete(t.id)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let requests = origin.requests("/norange.bin")
            #expect(requests.map(\.status) == [200, 200])
            #expect(requests.last?.range == "bytes=500000-")
            let restart = try #require(events.resumes(task: t.id).last)
            #expect(restart.offset == 0)
            #expect(restart.discarded == 500_000)
            #expect(restart.reason == "rangeNotHonored")
        }
    }

    /// The task waits a long backoff; meanwhile the file changes; `halftunesctl resume` retries at once, the
    /// old If-Range no longer matches, and the new version is downloaded whole. `show` and `list` explain the wait.
    @Test func aResourceChangedBetweenAttemptsIsDownloadedWhole() async throws {
        try await withDaemon { daemon, origin in
            let old = TestOrigin.randomBytes(count: MiB, seed: 507)
            let new = TestOrigin.randomBytes(count: MiB + 4096, seed: 508)
            origin.put("/changing.bin", old)
            let oldETag = try #require(origin.validators("/changing.bin")?.etag)
            var drop = TestOrigin.Behavior()
            drop.dropAfterBytes = 400_000
            origin.setBehavior("/changing.bin", drop)
            let client = try daemon.client()
            let events = try client.openHostileSession("change", retry: RetryPolicy(initialDelay: 3600, jitter: 0))
            let t = try client.startTask(origin.url("/changing.bin"), session: "change")
            let waiting = try client.waitFor(task: t.id, state: .waiting)
            #expect(waiting.waitingReason?.code == TaskErrorCode.connectionLost)
            #expect(waiting.bytesDurable == 400_000)
            let nextAttempt = try #require(waiting.nextAttemptAt.flatMap(Formatting.parseTimestamp))
            #expect(nextAttempt - Date().timeIntervalSince1970 > 3500)

            let show = try ctl(["show", String(t.id)], socket: daemon.socketPath)
            #expect(show.status == 0)
            #expect(show.stdout.contains("connectionLost"), "\(show.stdout)")
            #expect(show.stdout.contains("retrying in 59m") || show.stdout.contains("retrying in 1h"), "\(show.stdout)")
            #expect(show.stdout.contains("attempt 2"), "\(show.stdout)")
            #expect(show.stdout.contains("halftunesctl resume \(t.id)"), "\(show.stdout)")
            let list = try ctl(["list"], socket: daemon.socketPath)
            #expect(list.stdout.contains("waiting (connectionLost, in "), "\(list.stdout)")

            origin.change("/changing.bin", to: new)
            let resumed = try ctl(["resume", String(t.id)], socket: daemon.socketPath)
            #expect(resumed.status == 0, "\(resumed.stderr)")
            let done = try client.waitFor(task: t.id, state: .completed)
            try events.waitForDidComplete(t.id)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(new))
            let requests = origin.requests("/changing.bin")
            #expect(requests.count == 2)
            #expect(requests.last?.range == "bytes=400000-")
            #expect(requests.last?.ifRange == oldETag)
            #expect(requests.last?.status == 200)
            #expect(events.resumes(task: t.id).last?.reason == "resourceChanged")
        }
    }

    @Test func aMismatchingContentRangeIsDiscardedAndTheDownloadRestarts() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: MiB, seed: 509)
            origin.put("/wrong.bin", body)
            var b = TestOrigin.Behavior()
            b.wrongContentRange = true
            b.dropAfterBytes = 600_000
            origin.setBehavior("/wrong.bin", b)
            let client = try daemon.client()
            let events = try client.openHostileSession("wrong")
            let t = try client.startTask(origin.url("/wrong.bin"), session: "wrong")
            let done = try client.waitFor(task: t.id, state: .completed)
            try events.waitForDidComplete(t.id)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let requests = origin.requests("/wrong.bin")
            #expect(requests.map(\.status) == [200, 206, 200])
            #expect(requests[1].range == "bytes=600000-")
            #expect(requests[2].range == nil, "after a discard the next attempt starts from byte 0")
            let reasons = events.waitingReasons(task: t.id)
            #expect(reasons.map(\.code) == [TaskErrorCode.connectionLost, TaskErrorCode.invalidResponse])
            #expect(reasons.last?.message.contains("206 starts at byte 598976, but byte 600000 was requested") == true)
        }
    }

    @Test func aBodyShorterThanItsContentLengthIsResumedNeverCompleted() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 800_000, seed: 510)
            origin.put("/short.bin", body)
            var b = TestOrigin.Behavior()
            b.shortBody = true
            b.shortBodyTimes = 2
            origin.setBehavior("/short.bin", b)
            let client = try daemon.client()
            let events = try client.openHostileSession("short")
            let t = try client.startTask(origin.url("/short.bin"), session: "short")
            let done = try client.waitFor(task: t.id, state: .completed)
            try events.waitForDidComplete(t.id)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let requests = origin.requests("/short.bin")
            #expect(requests.map(\.range) == [nil, "bytes=400000-", "bytes=600000-"])
            #expect(requests.map(\.truncated) == [true, true, false])
            #expect(events.waitingReasons(task: t.id).map(\.code) == [TaskErrorCode.connectionLost, TaskErrorCode.connectionLost])
        }
    }

    /// A 416 for the range after the last byte, when the partial already holds the whole length, completes the
    /// task without downloading anything twice; a 416 for a range the server has discards and restarts.
    @Test func rangeNotSatisfiableCompletesOrRestarts() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 700_000, seed: 511)
            origin.put("/whole.bin", body)
            origin.put("/refused.bin", body)
            var whole = TestOrigin.Behavior()
            whole.omitContentLength = true
            whole.dropAfterBytes = Int64(body.count) // every byte, but not the closing chunk
            origin.setBehavior("/whole.bin", whole)
            var refused = TestOrigin.Behavior()
            refused.dropAfterBytes = 200_000
            refused.refuseRangeTimes = 1
            origin.setBehavior("/refused.bin", refused)
            let client = try daemon.client()
            let events = try client.openHostileSession("range")
            let w = try client.startTask(origin.url("/whole.bin"), session: "range")
            let wholeDone = try client.waitFor(task: w.id, state: .completed)
            #expect(try sha256(ofFile: wholeDone.location!) == TestOrigin.sha256Hex(body))
            let wholeRequests = origin.requests("/whole.bin")
            #expect(wholeRequests.map(\.status) == [200, 416])
            #expect(wholeRequests.last?.range == "bytes=\(body.count)-")
            #expect(origin.bytesServed("/whole.bin") == Int64(body.count))

            let r = try client.startTask(origin.url("/refused.bin"), session: "range")
            let refusedDone = try client.waitFor(task: r.id, state: .completed)
            try events.waitForDidComplete(r.id)
            #expect(try sha256(ofFile: refusedDone.location!) == TestOrigin.sha256Hex(body))
            let refusedRequests = origin.requests("/refused.bin")
            #expect(refusedRequests.map(\.status) == [200, 416, 200])
            #expect(refusedRequests.map(\.range) == [nil, "bytes=200000-", nil])
            #expect(events.waitingReasons(task: r.id).map(\.code) == [TaskErrorCode.connectionLost, TaskErrorCode.invalidResponse])
        }
    }

    /// Ten redirects are followed and the final URL is shown; an eleventh, a loop and a non-http scheme fail.
    @Test func redirectChainsLoopsAndSchemes() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 300_000, seed: 512)
            origin.put("/final.bin", body)
            let statuses = [301, 302, 303, 307, 308]
            func chain(_ prefix: String, hops: Int) {
                for hop in 1...hops {
                    var b = TestOrigin.Behavior()
                    b.redirectTo = hop == hops ? "/final.bin" : "/\(prefix)\(hop + 1)"
                    b.redirectStatus = statuses[hop % statuses.count]
                    origin.setBehavior("/\(prefix)\(hop)", b)
                }
            }
            chain("ten", hops: 10)
            chain("eleven", hops: 11)
            var a = TestOrigin.Behavior(), b = TestOrigin.Behavior(), ftp = TestOrigin.Behavior()
            a.redirectTo = "/loop-b"
            b.redirectTo = origin.url("/loop-a")
            ftp.redirectTo = "ftp://127.0.0.1/final.bin"
            origin.setBehavior("/loop-a", a)
            origin.setBehavior("/loop-b", b)
            origin.setBehavior("/ftp", ftp)
            let client = try daemon.client()
            _ = try client.openHostileSession("redirects")

            let ten = try client.createTask(TaskCreateParams(session: "redirects", url: origin.url("/ten1"),
                                                             destination: "ten.bin", start: true))
            let done = try client.waitFor(task: ten.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            #expect(done.currentURL == origin.url("/final.bin"))
            let show = try ctl(["show", String(ten.id)], socket: daemon.socketPath)
            let currentLine = show.stdout.split(separator: "\n").first { $0.hasPrefix("Current URL:") }
            #expect(currentLine?.hasSuffix(" " + origin.url("/final.bin")) == true, "\(show.stdout)")
            #expect((1...10).allSatisfy { origin.requests("/ten\($0)").count == 1 })

            for (path, code, text) in [("/eleven1", TaskErrorCode.tooManyRedirects, "Too many redirects (more than 10)"),
                                       ("/loop-a", TaskErrorCode.tooManyRedirects, "Redirect loop: "),
                                       ("/ftp", TaskErrorCode.redirectRefused, "only http and https")] {
                let t = try client.createTask(TaskCreateParams(session: "redirects", url: origin.url(path), start: true))
                let end = try client.waitForEnd(t.id)
                #expect(end.state == .failed, "\(path)")
                #expect(end.error?.code == code, "\(path): \(end.error?.message ?? "")")
                #expect(end.error?.message.contains(text) == true, "\(path): \(end.error?.message ?? "")")
                #expect(end.attempts == 1, "redirect failures are permanent")
            }
            #expect(origin.requests("/eleven11").count == 1)
            #expect(origin.requests("/final.bin").count == 1, "the eleventh redirect was not followed")
            #expect(origin.requests("/loop-a").count == 1 && origin.requests("/loop-b").count == 1)
            #expect(partialFiles(in: daemon.downloadsDir).isEmpty)
        }
    }

    @Test func retryPoliciesAreValidatedAndResolvedAtSessionOpen() async throws {
        try await withDaemon { daemon, _ in
            let client = try daemon.client()
            let opened = try client.openSession("policy", configuration: SessionConfiguration(
                retry: RetryPolicy(initialDelay: 0.5, maxAttempts: 5)))
            #expect(opened.session.configuration.retry == RetryPolicy(initialDelay: 0.5, maxDelay: 300, jitter: 0.2,
                                                                      maxRetryAfter: 3600, maxAttempts: 5))
            #expect(opened.session.configuration.allowInsecureRedirects == false)
            let bad: [(RetryPolicy, String)] = [
                (RetryPolicy(initialDelay: 0), "configuration.retry.initialDelay must be more than 0"),
                (RetryPolicy(initialDelay: 10, maxDelay: 2), "configuration.retry.maxDelay (2.0) must not be less than initialDelay (10.0)"),
                (RetryPolicy(jitter: 2), "configuration.retry.jitter must be from 0 to 1"),
                (RetryPolicy(maxRetryAfter: -5), "configuration.retry.maxRetryAfter must be from 0"),
                (RetryPolicy(maxAttempts: 0), "configuration.retry.maxAttempts must be at least 1"),
            ]
            for (policy, message) in bad {
                do {
                    _ = try client.openSession("policy", configuration: SessionConfiguration(retry: policy))
                    Issue.record("\(policy) was accepted")
                } catch HalfTunesClientError.rpc(let error) {
                    #expect(error.code == RPCErrorCode.invalidParams.rawValue)
                    #expect(error.message.contains(message), "\(error.message)")
                }
            }
            // A refused configuration changed nothing.
            #expect(try client.session("policy").configuration.retry?.maxAttempts == 5)
        }
    }
}
