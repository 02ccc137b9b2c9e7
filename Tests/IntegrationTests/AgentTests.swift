// The users' agents through the binaries: a root daemon, sessions of uid 65534 with a launchUnit, and stand-in
// agents (Tests/Fixtures/fake-agent.py) run as that uid and as another by setpriv.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("The users' agents", .serialized, .enabled(if: getuid() == 0, "needs root to run clients as other uids"))
struct AgentTests {
    static let nobody: (uid: UInt32, gid: UInt32) = (65534, 65534)

    /// A stand-in agent running as `user` until `stop()`, writing what it receives to `lines()`.
    final class FakeAgent {
        let out: String
        private let pid: Int32

        init(socket: String, as user: (uid: UInt32, gid: UInt32), in dir: TempDir, name: String) throws {
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("Fixtures/fake-agent.py").path
            out = dir.path + "/\(name).out"
            let pidFile = dir.path + "/\(name).pid"
            guard FileManager.default.createFile(atPath: out, contents: nil) else { throw TestFailure("cannot create \(out)") }
            _ = chmod(out, 0o666)
            let command = ["setsid", "/usr/bin/setpriv", "--reuid=\(user.uid)", "--regid=\(user.gid)", "--clear-groups",
                           "/usr/bin/python3", script, socket, out].map(shellQuoted).joined(separator: " ")
            try spawnAndWait("/bin/sh", ["-c", "\(command) >/dev/null 2>\(shellQuoted(dir.path + "/\(name).err")) </dev/null & echo $! >\(shellQuoted(pidFile))"])
            guard let text = try? String(contentsOfFile: pidFile, encoding: .utf8),
                  let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw TestFailure("cannot start the fake agent")
            }
            self.pid = pid
        }

        /// The JSON lines it received so far.
        func lines() -> [JSONValue] {
            ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
                try? JSONParser.parse(Array($0.utf8))
            }
        }

        func notifications(_ method: String) -> [JSONValue] {
            lines().filter { $0["method"] == .string(method) }
        }

        func stop() {
            kill(-pid, SIGKILL)
        }
    }

    /// uid 65534's session with a launchUnit in the system daemon: accepted; its events wait with nobody subscribed
    /// and no agent, so the launch waits ("waitingForAgent"). Its agent registers and is asked to start the unit;
    /// its reports (started, then ended without the events acknowledged) are the daemon's usual backoff. Another
    /// uid's agent gets nothing of it; a second agent of the same uid replaces the first; a connection that is not
    /// the agent cannot report.
    @Test func aUsersLaunchWaitsForTheirAgent() async throws {
        try await withDaemon { daemon, origin in
            chmod(daemon.dir.path, 0o711)
            chmod(daemon.socketPath, 0o666)
            chmod(daemon.downloadsDir, 0o711)
            let dir = try TempDir()
            defer { dir.remove() }
            _ = chmod(dir.path, 0o777)
            origin.put("/f.bin", TestOrigin.randomBytes(count: 100_000, seed: 3001))
            func asNobody(_ args: [String]) throws -> CLIResult { try ctl(args, socket: daemon.socketPath, asUser: Self.nobody) }
            func launch() throws -> SessionLaunch? {
                let shown = try asNobody(["session", "show", "mine", "--json"])
                let info = try WireCoding.decoder.decode(SessionInfo.self, from: Data(shown.stdout.utf8))
                return info.launch
            }
            let opened = try asNobody(["session", "open", "mine", "--launch-unit", "app.service"])
            #expect(opened.status == 0, "another user's launchUnit is accepted: \(opened.stderr)")
            let done = try asNobody(["download", origin.url("/f.bin"), "--session", "mine", "--wait"])
            #expect(done.status == 0, "\(done.stderr)")
            let waiting = try eventually("the launch waits for the user's agent") { () -> SessionLaunch? in
                let l = try launch()
                return l?.lastResult == "waitingForAgent" ? l : nil
            }
            #expect(waiting.failures == 0 && waiting.lastMessage?.contains("agent") == true, "\(waiting)")

            let stranger = try FakeAgent(socket: daemon.socketPath, as: (4242, 4242), in: dir, name: "stranger")
            defer { stranger.stop() }
            try eventually("the other uid's agent registered") {
                stranger.lines().contains { $0["result"]?["uid"] == .int(4242) } ? true : nil
            }
            let agent = try FakeAgent(socket: daemon.socketPath, as: Self.nobody, in: dir, name: "agent")
            defer { agent.stop() }
            let asked = try eventually("the agent asked to start the unit") { () -> JSONValue? in
                agent.notifications(AgentLaunch.method).first
            }
            #expect(asked["params"]?["session"] == .string("mine") && asked["params"]?["unit"] == .string("app.service"), "\(asked)")
            let received = agent.lines()
            let answered = received.firstIndex { $0["result"]?["uid"] == .int(65534) }
            let launched = received.firstIndex { $0["method"] == .string(AgentLaunch.method) }
            #expect(answered != nil && launched != nil && answered! < launched!, "the answer first: \(received)")
            let ended = try eventually("the agent's reports made it back off") { () -> SessionLaunch? in
                let l = try launch()
                return l?.lastResult == "exitedWithoutAcknowledging" ? l : nil
            }
            #expect(ended.failures >= 1 && ended.nextAttemptAt != nil, "\(ended)")
            #expect(stranger.notifications(AgentLaunch.method).isEmpty, "another uid's agent sees nothing of it")

            let successor = try FakeAgent(socket: daemon.socketPath, as: Self.nobody, in: dir, name: "successor")
            defer { successor.stop() }
            try eventually("the first agent told it was replaced") {
                agent.notifications(AgentLaunch.replacedMethod).isEmpty ? nil : true
            }
            #expect(successor.lines().contains { $0["result"]?["replaced"] == .bool(true) }, "\(successor.lines())")

            let report = try asNobody(["call", "agent.started", #"{"session":"mine","unit":"app.service"}"#])
            #expect(report.status != 0 && (report.stdout + report.stderr).contains("registered agent"),
                    "\(report.stdout)\(report.stderr)")
            // Root's uid is the daemon's: it starts root's units itself, and refuses an agent for it.
            let own = try ctl(["call", "agent.register"], socket: daemon.socketPath)
            #expect(own.status != 0 && (own.stdout + own.stderr).contains("no agent is needed"), "\(own.stdout)\(own.stderr)")
        }
    }
}
