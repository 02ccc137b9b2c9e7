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

    /// A cancel (or a suspend) that arrives while the finished file is being moved into place is held by the state
    /// (`heldWhileMoving`) until the move ends, then answered from the state the move left: the task ends completed
    /// with its file whole at the destination (never canceled with a file left behind).
    @Test(arguments: ["task.cancel", "task.suspend"])
    func aCancelDuringTheMoveWaitsAndFindsTheTaskCompleted(method: String) async throws {
        let origin = try await TestOrigin.start()
        let (daemon, release) = try Self.daemonHoldingMoves()
        defer { daemon.kill9(); daemon.dir.remove() }
        let body = TestOrigin.randomBytes(count: 256 * 1024 + 3, seed: 51)
        origin.put("/moving.bin", body)
        let client = try daemon.client()
        let t = try client.startDownload(origin.url("/moving.bin"))
        try eventually("the move to be held") { daemon.log().contains("held at publish.moving") ? true : nil }
        let raw = try RawSocket(path: daemon.socketPath)
        try raw.send(#"{"jsonrpc":"2.0","id":7,"method":"\#(method)","params":{"id":\#(t.id)}}"# + "\n")
        try eventually("the \(method) to wait for the move") {
            daemon.log().contains("waiting for the file to be moved into place") ? true : nil
        }
        let moving = try client.task(t.id) // the daemon still answers meanwhile
        #expect(moving.state == .running && moving.phase == .publishing, "the held input changed nothing")
        #expect(FileManager.default.createFile(atPath: release, contents: nil))
        let answer = try #require(try raw.readObject())
        let error = try #require(answer["error"] as? [String: Any], "\(answer)")
        #expect(error["code"] as? Int == RPCErrorCode.illegalStateChange.rawValue)
        #expect((error["message"] as? String)?.contains("completed") == true, "\(error)")
        let done = try client.task(t.id)
        #expect(done.state == .completed)
        let path = daemon.downloadsDir + "/moving.bin"
        #expect(done.location == path)
        #expect(try sha256(ofFile: path) == TestOrigin.sha256Hex(body))
        #expect(partialFiles(in: daemon.downloadsDir).isEmpty)
        try await origin.shutdown()
    }

    /// A download whose transfer ended gives its transfer slot to the next one while it is published: with
    /// max-concurrent 1 and every move held, the second file downloads while the first waits to be moved; both
    /// then say `running` with `phase: publishing`, and `daemon.status` counts two running tasks but no transfer.
    @Test func theSlotIsFreeWhileAFileIsPublished() async throws {
        let origin = try await TestOrigin.start()
        let (daemon, release) = try Self.daemonHoldingMoves()
        defer { daemon.kill9(); daemon.dir.remove() }
        let bodies = [TestOrigin.randomBytes(count: 96 * 1024, seed: 61), TestOrigin.randomBytes(count: 80 * 1024, seed: 62)]
        origin.put("/first.bin", bodies[0])
        origin.put("/second.bin", bodies[1])
        let client = try daemon.client()
        _ = try client.setLimits(maxConcurrent: 1)
        let a = try client.startDownload(origin.url("/first.bin"))
        try eventually("the first move to be held") { daemon.log().contains("held at publish.moving") ? true : nil }
        let publishing = try client.task(a.id)
        #expect(publishing.state == .running && publishing.phase == .publishing)
        #expect(publishing.bytesDurable == Int64(bodies[0].count))

        // The first still holds its task slot but not its transfer slot: the second transfers meanwhile.
        let b = try client.startDownload(origin.url("/second.bin"))
        let second = try eventually("the second to be publishing too") { () -> TaskInfo? in
            let info = try client.task(b.id)
            return info.phase == .publishing ? info : nil
        }
        #expect(second.state == .running && second.bytesDurable == Int64(bodies[1].count))
        #expect(origin.requests("/second.bin").count == 1)
        let status = try client.status()
        #expect(status.tasks["running"] == 2 && status.transfers == 0 && status.maxConcurrent == 1)
        #expect(try client.task(a.id).phase == .publishing)
        let shown = try ctl(["show", "\(a.id)"], socket: daemon.socketPath)
        #expect(shown.status == 0 && shown.stdout.contains("every byte received; moving it into place"), "\(shown.stdout)")

        #expect(FileManager.default.createFile(atPath: release, contents: nil))
        for (t, body) in zip([a, b], bodies) {
            let done = try client.waitFor(task: t.id, state: .completed, timeout: 30)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            #expect(done.phase == nil)
        }
        let after = try client.status()
        #expect(after.transfers == 0 && after.tasks["running"] == 0)
        try await origin.shutdown()
    }

    /// A daemon whose every publish stops before moving its file until `release` (a path) exists.
    static func daemonHoldingMoves() throws -> (DaemonProcess, release: String) {
        let daemon = try DaemonProcess(start: false)
        let release = daemon.dir.path + "/release-move"
        daemon.environment = ["HALFTUNES_HOLD_AT": "publish.moving:" + release]
        do {
            try daemon.start()
        } catch {
            daemon.kill9()
            daemon.dir.remove()
            throw error
        }
        return (daemon, release)
    }
}
