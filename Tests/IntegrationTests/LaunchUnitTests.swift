// A session's launchUnit through the binaries without a service manager: validation, other users, a start that fails.
import Foundation
import GRDB
import HalfTunesCore
import HalfTunesJournal
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

    /// Restarts the daemon with neither a user manager nor a user bus to reach (a developer's session bus must not
    /// answer instead): every start of a launch unit fails.
    func restartWithoutAManager(_ daemon: DaemonProcess) throws {
        daemon.kill9()
        daemon.environment = ["XDG_RUNTIME_DIR": daemon.dir.path + "/no-runtime-dir",
                              "DBUS_SESSION_BUS_ADDRESS": "unix:path=\(daemon.dir.path)/no-session-bus"]
        try daemon.restart()
    }

    /// Downloads `url` in the session and waits for the start of its launch unit (for the download's events) to
    /// fail: the launch as the session shows it then.
    func downloadUntilTheStartFails(_ url: String, session: String, _ daemon: DaemonProcess) throws -> SessionLaunch {
        let client = try daemon.client()
        let t = try client.createTask(TaskCreateParams(session: session, url: url, start: true))
        _ = try client.waitFor(task: t.id, state: .completed)
        return try eventually("the start to fail", timeout: 30) { () -> SessionLaunch? in
            let launch = try show(session, daemon).launch
            return launch?.lastResult == "startFailed" ? launch : nil
        }
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
            try restartWithoutAManager(daemon)
            let opened = try ctl(["session", "open", "lonely", "--launch-unit", "lonely-events@.service"], socket: daemon.socketPath)
            #expect(opened.status == 0 && opened.stdout.contains("lonely-events@lonely.service; not started yet"), "\(opened.stdout)")
            let failed = try downloadUntilTheStartFails(origin.url("/l.bin"), session: "lonely", daemon)
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

    /// A launch record the journal refuses (a trigger on the live daemon's journal, as a full disk would) is not
    /// only logged: the daemon writes it again, with a wait that grows, until the journal takes it. Without that, the
    /// journal would keep no record of the failed start, and a restart would start the unit at once instead of
    /// after the backoff the daemon announced.
    @Test func aLaunchRecordTheJournalRefusedIsWrittenAgain() async throws {
        try await withDaemon { daemon, origin in
            origin.put("/r.bin", TestOrigin.randomBytes(count: 10_000, seed: 412))
            try restartWithoutAManager(daemon)
            let opened = try ctl(["session", "open", "refused", "--launch-unit", "refused-events@.service"], socket: daemon.socketPath)
            #expect(opened.status == 0, "\(opened.stdout)\(opened.stderr)")
            let journal = try DatabaseQueue(path: daemon.stateDir + "/journal.sqlite")
            defer { try? journal.close() }
            try await journal.write { db in
                try db.execute(sql: """
                    CREATE TRIGGER refused_by_test BEFORE UPDATE OF launch ON sessions
                    BEGIN SELECT RAISE(ABORT, 'refused by the test'); END
                    """)
            }
            func journaled() throws -> SessionLaunchRecord? {
                let text = try journal.read { db in
                    try String.fetchOne(db, sql: "SELECT launch FROM sessions WHERE identifier LIKE '%/refused'")
                }
                return try text.map { try JSONDecoder().decode(SessionLaunchRecord.self, from: Data($0.utf8)) }
            }
            let failed = try downloadUntilTheStartFails(origin.url("/r.bin"), session: "refused", daemon)
            #expect(failed.failures == 1)
            // Refused, written again and refused again: the journal still has no record.
            try eventually("the record written again and refused again", timeout: 30) {
                daemon.log().components(separatedBy: "the session's launch record could not be journaled").count > 3 ? true : nil
            }
            #expect(daemon.log().contains("refused by the test"))
            #expect(try journaled() == nil)

            try await journal.write { db in try db.execute(sql: "DROP TRIGGER refused_by_test") }
            let written = try eventually("the record written once the journal takes it", timeout: 30) { () -> SessionLaunchRecord? in
                let record = try journaled()
                return record?.lastResult == "startFailed" ? record : nil
            }
            #expect(written.failures >= 1 && written.nextAttemptAt != nil)

            daemon.kill9()
            try daemon.restart()
            let kept = try #require(try show("refused", daemon).launch)
            #expect(kept.failures == written.failures && kept.lastResult == "startFailed", "\(kept)")
            let keptAt = try #require(kept.nextAttemptAt.flatMap(Timestamp.parse))
            #expect(abs(keptAt - (written.nextAttemptAt ?? 0)) < 0.01, "the backoff journaled, not a start at once: \(kept)")
        }
    }
}
