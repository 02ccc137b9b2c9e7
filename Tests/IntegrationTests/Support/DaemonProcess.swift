import Foundation
import HalfTunesKit
import HalfTunesProtocol

/// Where the built binaries are: $HALFTUNES_BIN_DIR (set by `make test`), else .build/debug.
enum Binaries {
    static var directory: String {
        if let dir = ProcessInfo.processInfo.environment["HALFTUNES_BIN_DIR"], !dir.isEmpty { return dir }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug").path
    }
    static var daemon: String { directory + "/halftunesd" }
    static var ctl: String { directory + "/halftunesctl" }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A temporary directory removed when the test ends.
final class TempDir: @unchecked Sendable {
    let path: String
    init() throws {
        var template = Array("/tmp/htd-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw TestFailure("mkdtemp failed") }
        path = String(cString: p)
    }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
    deinit { remove() }
}

/// A real `halftunesd` process on a temporary socket, state dir and downloads dir.
final class DaemonProcess: @unchecked Sendable {
    let dir: TempDir
    let socketPath: String
    let stateDir: String
    let downloadsDir: String
    var extraArgs: [String]
    /// Extra environment for the daemon process (e.g. test hooks); the test process's own is untouched.
    var environment: [String: String] = [:]
    /// A command that execs the daemon (its arguments follow), e.g. `["/usr/bin/prlimit", "--fsize=4194304:unlimited"]`
    /// to start it with a resource limit; it must exec in place so `pid` stays the daemon's.
    var launcher: [String] = []
    private(set) var process: Process?
    private var logHandle: FileHandle?
    var logPath: String { dir.path + "/daemon.log" }

    init(extraArgs: [String] = [], start: Bool = true) throws {
        dir = try TempDir()
        socketPath = dir.path + "/control.sock"
        stateDir = dir.path + "/state"
        downloadsDir = dir.path + "/downloads"
        self.extraArgs = extraArgs
        try FileManager.default.createDirectory(atPath: downloadsDir, withIntermediateDirectories: true)
        if start { try self.start() }
    }

    var pid: Int32 { process?.processIdentifier ?? 0 }
    var isRunning: Bool { process?.isRunning ?? false }

    func start() throws {
        try launch()
        try waitUntilReady()
    }

    /// Starts the process without waiting for it to answer. Refused while the last one runs: a second daemon
    /// would be left behind after the test (and the first would answer `waitUntilReady` for it).
    func launch() throws {
        if let p = process, p.isRunning {
            throw TestFailure("halftunesd (pid \(p.processIdentifier)) is still running: stop it (terminate, kill9) before starting another")
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: launcher.first ?? Binaries.daemon)
        p.arguments = (launcher.isEmpty ? [] : Array(launcher.dropFirst()) + [Binaries.daemon])
            + ["--config", "/dev/null", "--socket", socketPath, "--state-dir", stateDir, "--downloads-dir", downloadsDir,
               "--log-level", "debug"] + extraArgs
        var env = ProcessInfo.processInfo.environment
        // No system bus unless a test gives one (PrivateSystemBus): the machine's own NetworkManager, offline or
        // metered, must not hold the tests' transfers.
        env["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=\(dir.path)/no-system-bus"
        // Nor a session bus: the desktop of whoever runs the tests must not get their notifications.
        env["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(dir.path)/no-session-bus"
        // No proxy unless a test gives one: the machine's own must not carry the tests' requests.
        for name in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"] {
            env[name] = nil
        }
        // Every input the daemon's state is fed is replayed at its shutdown (`replayReports`).
        env["HALFTUNES_REPLAY_LOG"] = replayLogPath
        for (k, v) in environment { env[k] = v }
        p.environment = env
        let log = try p.runAppendingOutput(to: logPath)
        process = p
        logHandle = log
    }

    /// Waits until the daemon answers daemon.status (it accepts clients only after replaying its journal).
    func waitUntilReady(timeout: Double = 60) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            guard let p = process, p.isRunning else {
                throw TestFailure("halftunesd exited during start-up:\n\(log())")
            }
            if let client = try? HalfTunesClient(socketPath: socketPath), (try? client.status()) != nil { return }
            usleep(10_000)
        }
        throw TestFailure("halftunesd did not become ready within \(timeout) s:\n\(log())")
    }

    func client() throws -> HalfTunesClient { try HalfTunesClient(socketPath: socketPath) }

    /// kill -9: no chance to checkpoint or clean up.
    func kill9() {
        guard let p = process, p.isRunning else { return }
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
    }

    /// SIGTERM and wait; returns the exit status and how long the exit took.
    @discardableResult
    func terminate(timeout: Double = 30) throws -> (status: Int32, seconds: Double) {
        guard let p = process, p.isRunning else { return (process?.terminationStatus ?? 0, 0) }
        let start = Date()
        kill(p.processIdentifier, SIGTERM)
        while p.isRunning {
            if Date().timeIntervalSince(start) > timeout {
                kill(p.processIdentifier, SIGKILL)
                throw TestFailure("halftunesd did not exit within \(timeout) s of SIGTERM")
            }
            usleep(5_000)
        }
        p.waitUntilExit()
        return (p.terminationStatus, Date().timeIntervalSince(start))
    }

    func restart() throws { try start() }

    var replayLogPath: String { dir.path + "/replay.jsonl" }

    /// One report per daemon process that shut down gracefully: its inputs replayed into the state it began
    /// with (`InputLog` in the daemon). Throws when any input's replayed actions differed from the live ones.
    @discardableResult
    func replayReports() throws -> [[String: Any]] {
        guard let data = FileManager.default.contents(atPath: replayLogPath) else { return [] }
        let reports = try data.split(separator: 0x0A).map { line -> [String: Any] in
            guard let report = try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] else {
                throw TestFailure("a replay report is not a JSON object: \(String(decoding: line, as: UTF8.self))")
            }
            return report
        }
        for report in reports {
            if let mismatch = report["mismatch"] as? String {
                throw TestFailure("replaying the daemon's inputs gave other actions: \(mismatch)")
            }
        }
        return reports
    }

    /// The reports left by daemon processes that did not shut down gracefully (kill -9): each the replay, in step
    /// with the live state, of every input that process was fed (`<replay log>.live.<pid>`, rewritten after each
    /// input). Throws when any input's replayed actions differed from the live ones.
    @discardableResult
    func killedReplayReports() throws -> [[String: Any]] {
        let directory = (replayLogPath as NSString).deletingLastPathComponent
        let prefix = (replayLogPath as NSString).lastPathComponent + ".live."
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix(prefix) }.sorted()
        return try names.map { name -> [String: Any] in
            let data = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
            guard let report = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                throw TestFailure("a live replay report is not a JSON object: \(String(decoding: data, as: UTF8.self))")
            }
            if let mismatch = report["mismatch"] as? String {
                throw TestFailure("replaying a killed daemon's inputs gave other actions: \(mismatch)")
            }
            return report
        }
    }

    func log() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    deinit {
        if let p = process, p.isRunning {
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
        }
        try? logHandle?.close()
    }
}

extension Process {
    /// Runs the process with its standard output and error appended to the file at `path` (made if missing);
    /// returns the file's handle, for the caller to close once the process is done with it.
    func runAppendingOutput(to path: String) throws -> FileHandle {
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil)
        }
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        log.seekToEndOfFile()
        standardError = log
        standardOutput = log
        do {
            try run()
        } catch {
            try? log.close()
            throw error
        }
        return log
    }
}
