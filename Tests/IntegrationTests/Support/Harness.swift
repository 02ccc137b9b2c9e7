import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin

/// Runs `body` with a fresh origin and a fresh daemon (with `environment` added to its own); on failure prints
/// the daemon's log; always stops both and removes the temporary directories.
func withDaemon(_ args: [String] = [], environment: [String: String] = [:],
                _ body: (DaemonProcess, TestOrigin) async throws -> Void) async throws {
    let origin = try await TestOrigin.start()
    let daemon: DaemonProcess
    do {
        daemon = try DaemonProcess(extraArgs: args, start: false)
        daemon.environment = environment
        try daemon.start()
    } catch {
        try? await origin.shutdown()
        throw error
    }
    try await running(daemon, origin) { try await body(daemon, origin) }
}

/// Runs `body` with `daemon` and `origin`; on failure prints the daemon's log; always stops both and removes the
/// daemon's temporary directory.
func running(_ daemon: DaemonProcess, _ origin: TestOrigin, _ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch {
        print("---- halftunesd log ----\n\(daemon.log())\n------------------------")
        daemon.kill9()
        try? await origin.shutdown()
        daemon.dir.remove()
        throw error
    }
    // A graceful stop, so the daemon replays every input its state was fed and reports any difference.
    let replayed = Result { () throws -> Void in
        try daemon.terminate()
        try daemon.replayReports()
        try daemon.killedReplayReports() // processes the test killed
    }
    daemon.kill9()
    try await origin.shutdown()
    if case .failure = replayed { print("---- halftunesd log ----\n\(daemon.log())\n------------------------") }
    daemon.dir.remove()
    try replayed.get()
}

/// Runs `body` with a fresh origin, shut down afterwards whatever happens.
func withOrigin(_ body: (TestOrigin) async throws -> Void) async throws {
    let origin = try await TestOrigin.start()
    do {
        try await body(origin)
    } catch {
        try? await origin.shutdown()
        throw error
    }
    try await origin.shutdown()
}

let MiB = 1 << 20

extension TestOrigin.Behavior {
    static func throttled(_ bytesPerSecond: Int) -> TestOrigin.Behavior {
        var b = TestOrigin.Behavior()
        b.bytesPerSecond = bytesPerSecond
        return b
    }

    /// Every response stops writing after `bytes` body bytes (the connection stays open) until `releaseStall`.
    static func stalled(after bytes: Int64) -> TestOrigin.Behavior {
        var b = TestOrigin.Behavior()
        b.stallAfterBytes = bytes
        return b
    }
}

extension HalfTunesClient {
    /// Opens the session and creates a started download (`maxConnections` 1: never split, for the tests of
    /// one connection's `Range: bytes=N-` resume; nil: the default, up to 8).
    func startDownload(_ url: String, session: String = "test.session", destination: String? = nil,
                       maxConnections: Int? = nil) throws -> TaskInfo {
        _ = try openSession(session)
        return try createTask(TaskCreateParams(session: session, url: url, destination: destination, start: true,
                                               maxConnections: maxConnections))
    }
}
