import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// kill -9 at exact steps of the completion sequence (via the daemon's HALFTUNES_CRASH_AT test hook):
/// the next start must finish the job idempotently, with the file complete at its destination once.
@Suite("Crash during completion")
struct CrashPointTests {
    @Test(arguments: ["publish.afterIntent", "publish.afterMove"])
    func aCrashWhilePublishingIsFinishedOnRestart(point: String) async throws {
        let origin = try await TestOrigin.start()
        let daemon = try DaemonProcess(start: false)
        defer { daemon.kill9(); daemon.dir.remove() }
        daemon.environment = ["HALFTUNES_CRASH_AT": point]
        try daemon.start()
        let body = TestOrigin.randomBytes(count: 3 * MiB + 5, seed: 50)
        origin.put("/pub.bin", body)
        var client = try daemon.client()
        let t = try client.startDownload(origin.url("/pub.bin"))
        try eventually("the daemon to crash at \(point)") { daemon.isRunning ? nil : true }
        #expect(daemon.process?.terminationReason == .uncaughtSignal)
        daemon.environment = [:]
        try daemon.restart()
        client = try daemon.client()
        let done = try client.waitFor(task: t.id, state: .completed)
        let path = daemon.downloadsDir + "/pub.bin"
        #expect(done.location == path)
        #expect(try sha256(ofFile: path) == TestOrigin.sha256Hex(body))
        #expect(partialFiles(in: daemon.downloadsDir).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.downloadsDir) == ["pub.bin"])
        // The whole resource was fetched once: completion recovery does not download again.
        #expect(origin.requests("/pub.bin").count == 1)
        let replay = try EventRecorder(client: client, session: "test.session", after: 0)
        try replay.wait(for: "replay") { $0.isDidFinishEvents }
        #expect(replay.all.filter { $0.finishedLocation != nil }.count == 1)
        #expect(replay.all.filter(\.isDidComplete).count == 1)
        try await origin.shutdown()
    }
}
