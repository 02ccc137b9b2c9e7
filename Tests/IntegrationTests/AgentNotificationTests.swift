// Desktop notifications through the binaries: a root daemon, the real agent (`halftunesctl agent`) as uid 65534 on
// a private session bus of that user with a fake notification server and file manager
// (Tests/Fixtures/fake-notifications.py): one per finished download, bursts grouped, the actions, none for a
// session that did not ask, none twice across agent and daemon restarts.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("The agent's desktop notifications", .serialized,
       .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon"),
                "needs root (the agent runs as another uid) and dbus-daemon"))
struct AgentNotificationTests {
    static let nobody: (uid: UInt32, gid: UInt32) = (65534, 65534)

    /// The user's session bus (a private `dbus-daemon --session` run as the user) with the fake services on it, and
    /// the agent on it; everything is SIGKILLed by `stop()` (children of the test runner inherit its blocked SIGTERM).
    final class UserDesktop {
        let dir: TempDir
        let address: String
        var out: String { dir.path + "/calls.jsonl" }
        var control: String { dir.path + "/control" }
        var opened: String { dir.path + "/opened.txt" }
        var agentLog: String { dir.path + "/agent.err" }
        private var processes: [Process] = []
        private var agent: Process?

        init(as user: (uid: UInt32, gid: UInt32), capabilities: [String] = []) throws {
            dir = try TempDir()
            chown(dir.path, user.uid, user.gid)
            chmod(dir.path, 0o755)
            let bus = try Self.spawn(["/usr/bin/dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address=1",
                                      "--address=unix:path=\(dir.path)/bus"], as: user)
            processes.append(bus.process)
            address = try Self.readLine(bus.stdout)
            guard address.hasPrefix("unix:") else { throw TestFailure("dbus-daemon printed '\(address)'") }
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("Fixtures/fake-notifications.py").path
            let fake = try Self.spawn(["/usr/bin/python3", script, address, out, control] + capabilities, as: user)
            processes.append(fake.process)
            let ready = try Self.readLine(fake.stdout)
            guard ready == "ready" else { throw TestFailure("the fake notification server printed '\(ready)'") }
            // xdg-open, as the agent finds it on PATH: records what it was asked to open.
            let bin = dir.path + "/bin"
            try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
            try "#!/bin/sh\nprintf '%s\\n' \"$1\" >> \(shellQuoted(opened))\n".write(toFile: bin + "/xdg-open", atomically: true, encoding: .utf8)
            chmod(bin + "/xdg-open", 0o755)
            guard FileManager.default.createFile(atPath: opened, contents: nil) else { throw TestFailure("cannot create \(opened)") }
            chown(opened, user.uid, user.gid)
        }

        /// Starts `halftunesctl agent` as `user` on this session bus.
        func startAgent(socket: String, as user: (uid: UInt32, gid: UInt32)) throws {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            p.arguments = ["--reuid=\(user.uid)", "--regid=\(user.gid)", "--clear-groups", Binaries.ctl, "--socket", socket, "agent"]
            var env = ProcessInfo.processInfo.environment
            env["DBUS_SESSION_BUS_ADDRESS"] = address
            env["PATH"] = dir.path + "/bin:" + (env["PATH"] ?? "/usr/bin:/bin")
            env["XDG_RUNTIME_DIR"] = nil
            p.environment = env
            // The child has the file now; the handle closes as it goes.
            _ = try p.runAppendingOutput(to: agentLog)
            agent = p
        }

        func killAgent() {
            guard let p = agent else { return }
            agent = nil
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
        }

        /// What the agent logged.
        func agentLines() -> String { (try? String(contentsOfFile: agentLog, encoding: .utf8)) ?? "" }

        /// The calls the fake services received.
        func calls() -> [JSONValue] {
            ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
                try? JSONParser.parse(Array($0.utf8))
            }
        }

        func notifications() -> [(id: Int64, summary: String, body: String, actions: [String], value: JSONValue)] {
            calls().compactMap { call in
                guard case .int(let id)? = call["id"], let n = call["notify"], case .string(let summary)? = n["summary"],
                      case .string(let body)? = n["body"], case .array(let actions)? = n["actions"] else { return nil }
                return (id, summary, body, actions.compactMap { if case .string(let s) = $0 { s } else { nil } }, n)
            }
        }

        /// Makes the fake server emit `ActionInvoked(id, key)`.
        func invoke(_ id: Int64, _ key: String) throws {
            let old = (try? String(contentsOfFile: control, encoding: .utf8)) ?? ""
            try (old + "invoke \(id) \(key)\n").write(toFile: control, atomically: true, encoding: .utf8)
        }

        func stop() {
            killAgent()
            for p in processes {
                kill(p.processIdentifier, SIGKILL)
                p.waitUntilExit()
            }
            processes = []
            dir.remove()
        }

        private static func spawn(_ command: [String], as user: (uid: UInt32, gid: UInt32)) throws -> (process: Process, stdout: FileHandle) {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            p.arguments = ["--reuid=\(user.uid)", "--regid=\(user.gid)", "--clear-groups"] + command
            let out = Pipe()
            p.standardOutput = out
            try p.run()
            return (p, out.fileHandleForReading)
        }

        private static func readLine(_ handle: FileHandle) throws -> String {
            var bytes: [UInt8] = []
            while let byte = handle.readData(ofLength: 1).first, byte != UInt8(ascii: "\n") { bytes.append(byte) }
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    @Test func finishedDownloadsAreNotifiedOnceEach() async throws {
        try await withDaemon { daemon, origin in
            chmod(daemon.dir.path, 0o711)
            chmod(daemon.socketPath, 0o666)
            chmod(daemon.downloadsDir, 0o711)
            let desktop = try UserDesktop(as: Self.nobody)
            defer { desktop.stop() }
            try await scenario(daemon, origin, desktop)
        }
    }

    /// The daemon's own user has no agent: the daemon posts on its own session bus, for the CLI's session by default.
    @Test func theDaemonsOwnUserIsNotifiedByTheDaemon() async throws {
        let desktop = try UserDesktop(as: (0, 0))
        defer { desktop.stop() }
        let path = desktop.dir.path + "/bin:" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        try await withDaemon(environment: ["DBUS_SESSION_BUS_ADDRESS": desktop.address, "PATH": path]) { daemon, origin in
            origin.put("/own.iso", TestOrigin.randomBytes(count: 50_000, seed: 3120))
            origin.put("/app.iso", TestOrigin.randomBytes(count: 50_000, seed: 3121))
            let app = try ctl(["download", origin.url("/app.iso"), "--session", "com.example.app", "--wait"], socket: daemon.socketPath)
            #expect(app.status == 0, "\(app.stderr)")
            let own = try ctl(["download", origin.url("/own.iso"), "--wait"], socket: daemon.socketPath)
            #expect(own.status == 0, "\(own.stderr)")
            let posted = try eventually("the daemon's notification", timeout: 60) { () -> [(id: Int64, summary: String, body: String, actions: [String], value: JSONValue)]? in
                let n = desktop.notifications()
                return n.isEmpty ? nil : n
            }
            #expect(posted.count == 1 && posted[0].body.hasPrefix("own.iso — 50.0 kB in "), "an app's session posts none by default: \(posted.map(\.body))")
            try desktop.invoke(posted[0].id, "default")
            let opened = try eventually("xdg-open run by the daemon", timeout: 30) { () -> String? in
                let text = (try? String(contentsOfFile: desktop.opened, encoding: .utf8)) ?? ""
                return text.isEmpty ? nil : text
            }
            #expect(opened == daemon.downloadsDir + "/own.iso\n", "\(opened)")
        }
    }

    /// A server that renders markup in bodies (`body-markup`) gets the body escaped: a file name cannot become a
    /// link; one that does not gets the text as it is.
    @Test func bodiesAreEscapedForServersThatRenderMarkup() async throws {
        for markup in [true, false] {
            let desktop = try UserDesktop(as: (0, 0), capabilities: markup ? ["body-markup"] : [])
            defer { desktop.stop() }
            try await withDaemon(environment: ["DBUS_SESSION_BUS_ADDRESS": desktop.address]) { daemon, origin in
                origin.put("/f.iso", TestOrigin.randomBytes(count: 5_000, seed: 5403))
                let name = #"<img src="x" alt="y"><b>&amp;.iso"#
                let r = try ctl(["download", origin.url("/f.iso"), "--destination", daemon.downloadsDir + "/" + name, "--wait"],
                                socket: daemon.socketPath)
                #expect(r.status == 0, "\(r.stderr)")
                let posted = try eventually("the daemon's notification", timeout: 60) { () -> String? in
                    desktop.notifications().first?.body
                }
                if markup {
                    #expect(posted.hasPrefix(#"&lt;img src="x" alt="y"&gt;&lt;b&gt;&amp;amp;.iso — 5.0 kB in "#), "\(posted)")
                } else {
                    #expect(posted.hasPrefix(name + " — 5.0 kB in "), "\(posted)")
                }
            }
        }
    }

    private func scenario(_ daemon: DaemonProcess, _ origin: TestOrigin, _ desktop: UserDesktop) async throws {
        let socket = daemon.socketPath
        func asNobody(_ args: [String]) throws -> CLIResult {
            let r = try ctl(args, socket: socket, asUser: Self.nobody)
            if r.status != 0 { throw TestFailure("halftunesctl \(args): \(r.status)\n\(r.stdout)\(r.stderr)") }
            return r
        }
        func notifications(_ count: Int) throws -> [(id: Int64, summary: String, body: String, actions: [String], value: JSONValue)] {
            try eventually("\(count) notifications posted", timeout: 60) {
                let n = desktop.notifications()
                return n.count >= count ? n : nil
            }
        }
        for name in ["report.pdf", "quiet.bin", "after-agent.bin", "after-daemon.bin"] {
            origin.put("/\(name)", TestOrigin.randomBytes(count: 100_000, seed: 3100 + UInt64(name.count)))
        }
        _ = try asNobody(["session", "open", "notify.test", "--notifications", "completed"])
        _ = try asNobody(["session", "open", "quiet.test"])
        let shown = try asNobody(["session", "show", "notify.test"])
        #expect(shown.stdout.contains("notifications:      when a download completes or fails"), "\(shown.stdout)")
        try desktop.startAgent(socket: socket, as: Self.nobody)
        try eventually("the agent registered", timeout: 30) { desktop.agentLines().contains("registered with halftunesd") ? true : nil }
        // Another user's agent, to see that it hears nothing of these sessions.
        let strangerDir = try TempDir()
        defer { strangerDir.remove() }
        _ = chmod(strangerDir.path, 0o777)
        let stranger = try AgentTests.FakeAgent(socket: socket, as: (4242, 4242), in: strangerDir, name: "stranger")
        defer { stranger.stop() }
        try eventually("the other uid's agent registered") { stranger.lines().contains { $0["result"]?["uid"] == .int(4242) } ? true : nil }

        // One completed download: one notification with its name, size and actions; a session that did not ask: none.
        _ = try asNobody(["download", origin.url("/quiet.bin"), "--session", "quiet.test", "--wait"])
        _ = try asNobody(["download", origin.url("/report.pdf"), "--session", "notify.test", "--wait"])
        let first = try notifications(1)
        #expect(first.count == 1, "the quiet session's download is not notified: \(first.map(\.summary))")
        let report = try #require(first.first)
        #expect(report.summary == "Download completed", "\(report.value)")
        #expect(report.body.hasPrefix("report.pdf — 100.0 kB in "), "\(report.body)")
        #expect(report.actions == ["default", "Open", "show", "Show in folder"], "\(report.actions)")
        #expect(report.value["app"] == .string("halftunesd") && report.value["hints"]?["category"] == .string("transfer.complete"))

        // Its actions: "Show in folder" asks the file manager; a click opens the file with xdg-open.
        let location = daemon.downloadsDir + "/65534/report.pdf"
        try desktop.invoke(report.id, "show")
        let shownItems = try eventually("the file manager asked to show the file", timeout: 30) { () -> JSONValue? in
            desktop.calls().first { $0["showItems"] != nil }?["showItems"]
        }
        #expect(shownItems == .array([.string(URL(fileURLWithPath: location).absoluteString)]), "\(shownItems)")
        try desktop.invoke(report.id, "default")
        let opened = try eventually("xdg-open run for the file", timeout: 30) { () -> String? in
            let text = (try? String(contentsOfFile: desktop.opened, encoding: .utf8)) ?? ""
            return text.isEmpty ? nil : text
        }
        #expect(opened == location + "\n", "\(opened)")

        // A failed download: its own notification, with the reason.
        _ = try? ctl(["download", origin.url("/missing.bin"), "--session", "notify.test", "--wait"], socket: socket, asUser: Self.nobody)
        let failed = try notifications(2)[1]
        #expect(failed.summary == "Download failed" && failed.body.hasPrefix("missing.bin: "), "\(failed.value)")
        #expect(failed.value["hints"]?["category"] == .string("transfer.error"), "\(failed.value)")

        // A burst: five downloads that finish together are one notification.
        origin.put("/burst.bin", TestOrigin.randomBytes(count: 4000, seed: 3111))
        var stall = TestOrigin.Behavior()
        stall.stallAfterBytes = 1000
        origin.setBehavior("/burst.bin", stall)
        for i in 1...5 {
            _ = try asNobody(["download", origin.url("/burst.bin"), "--session", "notify.test", "--destination", daemon.downloadsDir + "/65534/burst-\(i).bin"])
        }
        try await origin.waitForRequests("/burst.bin", count: 5)
        try await origin.waitUntilBytesServed("/burst.bin", atLeast: 5000)
        origin.releaseStall("/burst.bin")
        let burst = try notifications(3)[2]
        #expect(burst.summary == "5 downloads completed", "\(burst.value)")
        #expect((1...5).allSatisfy { burst.body.contains("burst-\($0).bin") }, "\(burst.body)")
        #expect(burst.actions == ["default", "Show in folder"], "\(burst.actions)")

        // The agent killed and started again, then the daemon: nothing is posted again, the next download is.
        desktop.killAgent()
        try desktop.startAgent(socket: socket, as: Self.nobody)
        _ = try asNobody(["download", origin.url("/after-agent.bin"), "--session", "notify.test", "--wait"])
        let afterAgent = try notifications(4)
        #expect(afterAgent[3].body.hasPrefix("after-agent.bin — "), "\(afterAgent[3].value)")
        daemon.kill9()
        try daemon.restart()
        chmod(daemon.socketPath, 0o666)
        _ = try asNobody(["download", origin.url("/after-daemon.bin"), "--session", "notify.test", "--wait"])
        let afterDaemon = try notifications(5)
        #expect(afterDaemon[4].body.hasPrefix("after-daemon.bin — "), "\(afterDaemon[4].value)")
        // One more download settles that nothing else was queued behind: exactly one more notification.
        _ = try asNobody(["download", origin.url("/quiet.bin"), "--session", "notify.test", "--destination", daemon.downloadsDir + "/65534/last.bin", "--wait"])
        let all = try notifications(6)
        #expect(all.count == 6 && all[5].body.hasPrefix("last.bin — "), "\(all.map(\.summary)) \(all.map(\.body))")
        #expect(!desktop.agentLines().contains("cannot post"), "\(desktop.agentLines())")
        #expect(stranger.notifications(AgentNotice.method).isEmpty, "another user's agent hears nothing: \(stranger.lines())")
    }
}
