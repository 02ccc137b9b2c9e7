import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// The daemon's three services (core, control server, supervisor) start in that order and stop in reverse.
@Suite("Start-up and shutdown order", .serialized)
struct ServiceGroupTests {
    /// The process state letter from /proc/<pid>/stat ("T" when stopped).
    private func processState(_ pid: Int32) -> String? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        return stat[stat.index(close, offsetBy: 2)...].split(separator: " ").first.map(String.init)
    }

    @Test func sigtermDuringTheJournalReplayStopsCleanlyAndReleasesTheStateDirectory() throws {
        let daemon = try DaemonProcess(start: false)
        defer { daemon.kill9(); daemon.dir.remove() }
        // Journal something first, so the replay has work to do.
        try daemon.start()
        var client = try daemon.client()
        _ = try client.openSession("test.session")
        let created = try client.createTask(TaskCreateParams(session: "test.session", url: "http://127.0.0.1:9/x.bin"))
        try daemon.terminate()

        daemon.environment = ["HALFTUNES_STOP_AT": "recover.start"]
        try daemon.launch()
        let pid = daemon.pid
        try eventually("the daemon to stop itself before replaying the journal") {
            daemon.isRunning ? (processState(pid) == "T" ? true : nil) : true
        }
        #expect(daemon.isRunning)
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
        kill(pid, SIGTERM)
        kill(pid, SIGCONT)
        try eventually("the daemon to exit") { daemon.isRunning ? nil : true }
        #expect(daemon.process?.terminationReason == .exit)
        #expect(daemon.process?.terminationStatus == 0)
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
        #expect(daemon.log().contains("stopped"))

        // The lock was released and the journal closed intact: the next start serves the task.
        daemon.environment = [:]
        try daemon.restart()
        client = try daemon.client()
        #expect(try client.task(created.id).state == .suspended)
    }

    @Test func sigtermStopsTheSupervisorThenTheSocketThenTheCore() throws {
        let daemon = try DaemonProcess()
        defer { daemon.kill9(); daemon.dir.remove() }
        let (status, _) = try daemon.terminate()
        #expect(status == 0)
        let lines = daemon.log().split(separator: "\n").map(String.init)
        func index(_ text: String) -> Int? { lines.firstIndex { $0.contains(text) } }
        let replayed = try #require(index("journal replayed"))
        let ready = try #require(index(" ready"))
        let stopping = try #require(index("shutting down"))
        let checkpointed = try #require(index("transfers checkpointed"))
        let stopped = try #require(lines.firstIndex { $0.hasSuffix(">stopped") })
        #expect(replayed < ready)
        #expect(ready < stopping)
        #expect(stopping < checkpointed)
        #expect(checkpointed < stopped)
    }
}
