// A session's launchUnit through the binaries without a service manager: validation, other users, a start that fails.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("launchUnit without a service manager", .serialized)
struct LaunchUnitTests {
    func show(_ id: String, _ daemon: DaemonProcess) throws -> SessionInfo {
        let r = try ctl(["session", "show", id, "--json"], socket: daemon.socketPath)
        guard r.status == 0 else { throw TestFailure("session show: \(r.stdout)\(r.stderr)") }
        return try JSONDecoder().decode(SessionInfo.self, from: Data(r.stdout.utf8))
    }

    /// Bad unit names and over-long template instances are refused with the field named; another user's session
    /// may have one (its user's agent starts it in that user's manager: AgentTests), checked the same way.
    @Test func launchUnitsAreValidated() async throws {
        try await withDaemon { daemon, _ in
            let bad = try ctl(["session", "open", "bad.units", "--launch-unit", "not a unit"], socket: daemon.socketPath)
            #expect(bad.status == 2 && bad.stderr.contains("launchUnit must be a systemd service name"), "\(bad.stderr)")
            let socketUnit = try ctl(["session", "open", "bad.units", "--launch-unit", "app.socket"], socket: daemon.socketPath)
            #expect(socketUnit.status == 2, "\(socketUnit.stderr)")
            let long = String(repeating: "x-", count: 100)
            let tooLong = try ctl(["session", "open", long, "--launch-unit", "app@.service"], socket: daemon.socketPath)
            #expect(tooLong.status == 2 && tooLong.stderr.contains("longer than 255 bytes"), "\(tooLong.stderr)")

            chmod(daemon.dir.path, 0o711)
            chmod(daemon.socketPath, 0o666)
            let other = try ctl(["session", "open", "theirs", "--launch-unit", "app@.service"], socket: daemon.socketPath,
                                asUser: (65534, 65534))
            #expect(other.status == 0, "\(other.stdout)\(other.stderr)")
            let otherBad = try ctl(["session", "open", "theirs", "--launch-unit", "not a unit"], socket: daemon.socketPath,
                                   asUser: (65534, 65534))
            #expect(otherBad.status == 2 && otherBad.stderr.contains("launchUnit must be a systemd service name"), "\(otherBad.stderr)")
        }
    }

    /// With no service manager to reach, a completed download's events start nothing: the start fails with the
    /// reason shown, backs off 10 s, and is journaled (it survives kill -9); `--no-launch-unit` forgets it.
    @Test func aStartThatCannotReachTheManagerBacksOff() async throws {
        try await withDaemon { daemon, origin in
            origin.put("/l.bin", TestOrigin.randomBytes(count: 10_000, seed: 411))
            daemon.kill9()
            // Neither a user manager nor a user bus (a developer's session bus must not answer instead).
            daemon.environment = ["XDG_RUNTIME_DIR": daemon.dir.path + "/no-runtime-dir",
                                  "DBUS_SESSION_BUS_ADDRESS": "unix:path=\(daemon.dir.path)/no-session-bus"]
            try daemon.restart()
            let opened = try ctl(["session", "open", "lonely", "--launch-unit", "lonely-events@.service"], socket: daemon.socketPath)
            #expect(opened.status == 0 && opened.stdout.contains("lonely-events@lonely.service; not started yet"), "\(opened.stdout)")
            let client = try daemon.client()
            let t = try client.createTask(TaskCreateParams(session: "lonely", url: origin.url("/l.bin"), start: true))
            _ = try client.waitFor(task: t.id, state: .completed)
            let failed = try eventually("the start to fail", timeout: 30) { () -> SessionLaunch? in
                let launch = try show("lonely", daemon).launch
                return launch?.lastResult == "startFailed" ? launch : nil
            }
            #expect(failed.failures == 1 && failed.nextAttemptAt != nil && failed.lastMessage?.contains("service manager") == true,
                    "\(failed)")
            let shown = try ctl(["session", "show", "lonely"], socket: daemon.socketPath)
            #expect(shown.stdout.contains("startFailed") && shown.stdout.contains("1 failure in a row"), "\(shown.stdout)")

            daemon.kill9()
            try daemon.restart()
            let kept = try #require(try show("lonely", daemon).launch)
            #expect(kept.failures == 1 && kept.nextAttemptAt == failed.nextAttemptAt && kept.lastResult == "startFailed")

            let cleared = try ctl(["session", "open", "lonely", "--no-launch-unit"], socket: daemon.socketPath)
            #expect(cleared.status == 0 && cleared.stdout.contains("launch unit:        none"), "\(cleared.stdout)")
            #expect(try show("lonely", daemon).launch == nil)
        }
    }
}
