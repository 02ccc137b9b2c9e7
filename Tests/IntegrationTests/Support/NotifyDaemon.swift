import Foundation
import HalfTunesKit
import TestOrigin

/// A real `halftunesd` under `systemd-socket-activate` (the emulated service manager): the activator binds
/// the socket and execs the daemon in place on the first connection, passing the socket as fd 3 named
/// `control`, plus NOTIFY_SOCKET (a test-owned `NotifyListener`) and, when asked, WATCHDOG_USEC.
final class NotifyDaemon: @unchecked Sendable {
    let dir: TempDir
    let socketPath: String
    let stateDir: String
    let downloadsDir: String
    let configPath: String
    /// Given as --socket: a socket-activated daemon must not bind (or create) it.
    let unusedSocketPath: String
    let notify: NotifyListener
    let extraArgs: [String]
    let watchdogUSec: UInt64?
    private(set) var process: Process?
    private var logHandle: FileHandle?
    var logPath: String { dir.path + "/daemon.log" }

    static func activatorPath() throws -> String {
        for dir in ["/usr/bin", "/bin", "/usr/local/bin"] where FileManager.default.isExecutableFile(atPath: dir + "/systemd-socket-activate") {
            return dir + "/systemd-socket-activate"
        }
        throw TestFailure("systemd-socket-activate is not installed (Debian package 'systemd'; `make deps` installs it)")
    }

    init(config: String = "", extraArgs: [String] = [], watchdogUSec: UInt64? = nil) throws {
        dir = try TempDir()
        socketPath = dir.path + "/control.sock"
        stateDir = dir.path + "/state"
        downloadsDir = dir.path + "/downloads"
        configPath = dir.path + "/halftunesd.conf"
        unusedSocketPath = dir.path + "/unused.sock"
        self.extraArgs = extraArgs
        self.watchdogUSec = watchdogUSec
        notify = try NotifyListener(path: dir.path + "/notify.sock")
        try FileManager.default.createDirectory(atPath: downloadsDir, withIntermediateDirectories: true)
        try writeConfig(config)
    }

    func writeConfig(_ text: String) throws {
        try text.write(toFile: configPath, atomically: true, encoding: .utf8)
    }

    var pid: Int32 { process?.processIdentifier ?? 0 }
    var isRunning: Bool { process?.isRunning ?? false }

    /// Whether the activator has exec'd halftunesd (before the first connection it is still itself).
    var daemonHasStarted: Bool {
        guard isRunning, let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe") else { return false }
        return exe == URL(fileURLWithPath: Binaries.daemon).resolvingSymlinksInPath().path
    }

    /// Starts the activator and waits until it listens. The daemon itself starts on the first connection.
    func launch() throws {
        unlink(socketPath) // left behind by a previous run: the activator binds a fresh one
        var args = ["-l", socketPath, "--fdname=control", "-E", "NOTIFY_SOCKET=\(notify.path)",
                    "-E", "SWIFT_BACKTRACE=enable=no"]
        if let watchdogUSec { args += ["-E", "WATCHDOG_USEC=\(watchdogUSec)"] }
        args += [Binaries.daemon, "--config", configPath, "--socket", unusedSocketPath,
                 "--state-dir", stateDir, "--downloads-dir", downloadsDir] + extraArgs
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try Self.activatorPath())
        p.arguments = args
        let log = try p.runAppendingOutput(to: logPath)
        process = p
        try? logHandle?.close()
        logHandle = log
        _ = try eventually("systemd-socket-activate to listen on \(socketPath)", timeout: 30) { () -> Bool? in
            guard p.isRunning else { throw TestFailure("systemd-socket-activate exited:\n\(self.log())") }
            var st = stat()
            return lstat(socketPath, &st) == 0 && (st.st_mode & S_IFMT) == S_IFSOCK ? true : nil
        }
    }

    func client() throws -> HalfTunesClient { try HalfTunesClient(socketPath: socketPath) }

    func send(_ signal: Int32) {
        guard let p = process, p.isRunning else { return }
        kill(p.processIdentifier, signal)
    }

    /// Waits for the process to exit on its own; returns its exit status.
    func waitForExit(timeout: Double = 30) throws -> Int32 {
        guard let p = process else { throw TestFailure("not launched") }
        _ = try eventually("halftunesd to exit", timeout: timeout) { p.isRunning ? nil : true }
        p.waitUntilExit()
        return p.terminationStatus
    }

    func log() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    func kill9() {
        guard let p = process, p.isRunning else { return }
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
    }

    deinit {
        kill9()
        try? logHandle?.close()
        notify.close()
    }
}

/// Runs `body` with a fresh origin and a launched `NotifyDaemon`; on failure prints the daemon's log and
/// the notify messages; always stops both and removes the temporary directory.
func withNotifyDaemon(config: String = "", args: [String] = [], watchdogUSec: UInt64? = nil,
                      _ body: (NotifyDaemon, TestOrigin) async throws -> Void) async throws {
    let origin = try await TestOrigin.start()
    let daemon: NotifyDaemon
    do {
        daemon = try NotifyDaemon(config: config, extraArgs: args, watchdogUSec: watchdogUSec)
        try daemon.launch()
    } catch {
        try? await origin.shutdown()
        throw error
    }
    do {
        try await body(daemon, origin)
    } catch {
        print("---- halftunesd log ----\n\(daemon.log())\n---- notify messages ----\n"
              + daemon.notify.messages.map(\.description).joined(separator: "\n") + "\n------------------------")
        daemon.kill9()
        try? await origin.shutdown()
        daemon.dir.remove()
        throw error
    }
    daemon.kill9()
    try await origin.shutdown()
    daemon.dir.remove()
}
