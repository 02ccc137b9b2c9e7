// stop() and the idle timeout before any response head: the request is cut short and nothing is lost.
import HalfTunesCore
import HalfTunesEngine
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite struct TransferStopTests {
    @Test func stopWhileWaitingForTheHead() async throws {
        try await EngineFixture.with { f in
            let silent = try SilentListener()
            let partial = f.dir.path("silent.partial")
            try writeFile(partial, [1, 2, 3, 4, 5])
            let observer = RecordingObserver(partialPath: partial)
            let transfer = f.transfer(AttemptRequest.download(taskID: 5, url: silent.url("/x"), partialPath: partial,
                                                      durableOffset: 5,
                                                      validators: Validators(etag: "\"e\"", lastModified: nil)),
                                      observer: observer)
            let running = Task { await transfer.run() }
            try await waitUntil("a connection", stopping: transfer, running) { silent.hasPendingConnection }
            transfer.stop()
            #expect(await running.value == .stopped(durableBytes: 5))
            #expect(try readFile(partial) == [1, 2, 3, 4, 5])
            #expect(observer.snapshot.starts.isEmpty)
            #expect(observer.snapshot.checkpoints.last?.durable == 5)
        }
    }

    @Test func idleTimeoutWhileWaitingForTheHead() async throws {
        try await EngineFixture.with { f in
            let silent = try SilentListener()
            let partial = f.dir.path("quiet.partial")
            let request = AttemptRequest.download(taskID: 6, url: silent.url("/x"), partialPath: partial, requestTimeout: 0.3)
            let outcome = await f.transfer(request, observer: RecordingObserver(partialPath: partial)).run()
            let failure = try #require(outcome.failure, "\(outcome)")
            #expect(failure.error.code == TaskErrorCode.timedOut)
            #expect(failure.isTransient)
            #expect(failure.durableBytes == 0)
        }
    }

    @Test func stopDuringAStalledBodyKeepsEveryReceivedByte() async throws {
        try await EngineFixture.with { f in
            let body = TestOrigin.randomBytes(count: 2 << 20, seed: 14)
            f.origin.put("/p.bin", body)
            var behavior = TestOrigin.Behavior()
            behavior.stallAfterBytes = 777_777
            f.origin.setBehavior("/p.bin", behavior)
            let partial = f.dir.path("p.partial")
            let observer = RecordingObserver(partialPath: partial)
            let transfer = f.transfer(AttemptRequest.download(taskID: 8, url: f.origin.url("/p.bin"), partialPath: partial,
                                                      checkpointInterval: 60), observer: observer)
            let running = Task { await transfer.run() }
            try await waitUntil("777,777 bytes received", stopping: transfer, running) { observer.snapshot.writes.last?.total == 777_777 }
            transfer.stop()
            // With no periodic checkpoint due, stop() itself flushes, fsyncs and checkpoints.
            #expect(await running.value == .stopped(durableBytes: 777_777))
            #expect(try readFile(partial)[...] == body.prefix(777_777))
            #expect(observer.snapshot.checkpoints.map(\.durable) == [777_777])
            let writes = observer.snapshot.writes
            #expect(writes.map(\.delta).reduce(0, +) == 777_777)
            #expect(writes.last?.total == 777_777)
        }
    }
}
