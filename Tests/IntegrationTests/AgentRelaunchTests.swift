// The users' agent for real: the daemon as root, a real `systemd --user` manager of uid 65534 running
// `halftunesctl agent` from systemd/user/halftunesd-agent.service, and that user's sessions' launch units started
// there; the agent and the daemon killed and restarted in between, nothing lost or started twice.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("The user's agent under a real user manager", .serialized,
       .enabled(if: getuid() == 0 && SystemdHost.managerUnavailableReason == nil,
                "needs root and a systemd manager: \(SystemdHost.managerUnavailableReason ?? "not root")"))
struct AgentRelaunchTests {
    let relaunch = RelaunchTests()

    /// The packaged agent unit, first as shipped (its conditions keep it from starting for this user), then with a
    /// drop-in that points it at the test daemon's socket and drops the conditions on /run/halftunesd and group
    /// halftunesd (which this host has not), and two probe templates, as RelaunchTests'.
    func install(_ manager: SystemdUserManager, socket: String) throws {
        try manager.installUnit("halftunesd-agent.service", contents: try SystemdUnitFiles.text(SystemdUnitFiles.agentUnit))
        // As shipped, it does not start for this user (outside group halftunesd, no system socket): skipped, not failed.
        try manager.systemctlOK(["daemon-reload"])
        try manager.systemctlOK(["start", "halftunesd-agent.service"])
        #expect(try manager.property("ConditionResult", of: "halftunesd-agent.service") == "no")
        #expect(try manager.property("ActiveState", of: "halftunesd-agent.service") == "inactive")
        #expect(try manager.property("ExecMainStartTimestampMonotonic", of: "halftunesd-agent.service") == "0", "it never ran")
        try manager.installUnit("halftunesd-agent.service.d/test.conf", contents: """
            [Unit]
            ConditionPathExists=

            [Service]
            ExecStart=
            ExecStart=\(Binaries.ctl) --socket \(socket) agent
            RestartSec=1s

            """)
        try RelaunchTests.installProbes(manager, socket: socket)
        try manager.systemctlOK(["daemon-reload"])
    }

    @Test func theAgentStartsTheUsersUnitsAcrossRestarts() async throws {
        try await withDaemon { daemon, origin in
            chmod(daemon.dir.path, 0o711)
            chmod(daemon.socketPath, 0o666)
            chmod(daemon.downloadsDir, 0o711)
            try await withSystemdUserManager { manager in try await scenario(manager, daemon, origin) }
        }
    }

    private func scenario(_ manager: SystemdUserManager, _ daemon: DaemonProcess, _ origin: TestOrigin) async throws {
        let socket = daemon.socketPath
        try install(manager, socket: socket)
        let user = (uid: manager.uid, gid: manager.gid)
        let body = TestOrigin.randomBytes(count: 64 * 1024, seed: 3003)
        origin.put("/a.bin", body)
        let log = manager.home + "/probe-agent.test.log"
        func launch(_ session: String) throws -> SessionLaunch? { try relaunch.session(session, socket: socket, as: user).launch }
        /// Waits for the probe's run `n` (1-based) to end, and returns its lines.
        func run(_ n: Int, of path: String = log) throws -> [String] {
            try eventually("the probe's run \(n) to end", timeout: 90) { () -> [String]? in
                let runs = relaunch.runs(path)
                return runs.count >= n && runs[n - 1].last?.hasPrefix("end") == true ? runs[n - 1] : nil
            }
        }
        func acknowledged(_ session: String) throws {
            _ = try eventually("\(session)'s launch to be acknowledged", timeout: 60) { () -> Bool? in
                try launch(session)?.lastResult == "acknowledged" ? true : nil
            }
        }

        // No agent yet: the launch waits for it.
        let opened = try ctl(["session", "open", "agent.test", "--launch-unit", "htd-probe@.service"], socket: socket, asUser: user)
        #expect(opened.status == 0, "\(opened.stdout)\(opened.stderr)")
        let first = try relaunch.download(origin.url("/a.bin"), session: "agent.test", socket: socket, as: user)
        _ = try eventually("the launch to wait for the agent", timeout: 60) { () -> Bool? in
            try launch("agent.test")?.lastResult == "waitingForAgent" ? true : nil
        }
        // The agent starts with the user's manager's unit: the probe runs as that user, gets the events, acknowledges.
        try manager.systemctlOK(["start", "halftunesd-agent.service"])
        let run1 = try run(1)
        #expect(run1.last?.hasPrefix("end acknowledged") == true, "\(run1)")
        #expect(run1.contains("didComplete \(first.id) ok"), "\(run1)")
        let finished = try #require(run1.first { $0.hasPrefix("didFinishDownloading \(first.id) ") })
        #expect(try sha256(ofFile: String(finished.dropFirst("didFinishDownloading \(first.id) ".count))) == TestOrigin.sha256Hex(body))
        try acknowledged("agent.test")
        #expect(try manager.property("Result", of: "htd-probe@agent.test.service") == "success", "run by the user's manager")

        // The agent killed: its manager starts it again, and the next completion is handed over; only the new events.
        let agentPID = try manager.property("MainPID", of: "halftunesd-agent.service")
        try manager.systemctlOK(["kill", "-s", "KILL", "halftunesd-agent.service"])
        _ = try eventually("the agent to be running again", timeout: 60) { () -> Bool? in
            let pid = try manager.property("MainPID", of: "halftunesd-agent.service")
            return pid != agentPID && pid != "0" ? true : nil
        }
        let second = try relaunch.download(origin.url("/a.bin"), session: "agent.test", socket: socket, as: user)
        let run2 = try run(2)
        #expect(run2.last?.hasPrefix("end acknowledged") == true && run2.contains("didComplete \(second.id) ok"), "\(run2)")
        #expect(!run2.contains("didComplete \(first.id) ok"), "acknowledged events are not handed over again: \(run2)")
        try acknowledged("agent.test")

        // The agent stopped while a download completes: the launch waits, and happens when the agent is back.
        try manager.systemctlOK(["stop", "halftunesd-agent.service"])
        let third = try relaunch.download(origin.url("/a.bin"), session: "agent.test", socket: socket, as: user)
        _ = try eventually("the launch to wait for the stopped agent", timeout: 60) { () -> Bool? in
            try launch("agent.test")?.lastResult == "waitingForAgent" ? true : nil
        }
        #expect(relaunch.runs(log).count == 2)
        try manager.systemctlOK(["start", "halftunesd-agent.service"])
        let run3 = try run(3)
        #expect(run3.last?.hasPrefix("end acknowledged") == true && run3.contains("didComplete \(third.id) ok"), "\(run3)")
        try acknowledged("agent.test")

        // The daemon killed -9 and restarted: the agent connects again by itself and is asked for what is due.
        daemon.kill9()
        try daemon.restart()
        chmod(daemon.socketPath, 0o666)
        let fourth = try relaunch.download(origin.url("/a.bin"), session: "agent.test", socket: socket, as: user)
        let run4 = try run(4)
        #expect(run4.last?.hasPrefix("end acknowledged") == true && run4.contains("didComplete \(fourth.id) ok"), "\(run4)")
        #expect(!run4.contains { $0.hasPrefix("didComplete \(third.id) ") }, "\(run4)")
        try acknowledged("agent.test")
        #expect(try manager.property("NRestarts", of: "halftunesd-agent.service") == "0", "it reconnected without exiting")

        // A client that fails is started again after the backoff, by the agent, with the same events.
        let flaky = try ctl(["session", "open", "flaky.test", "--launch-unit", "htd-probe-flaky@.service"], socket: socket, asUser: user)
        #expect(flaky.status == 0, "\(flaky.stdout)\(flaky.stderr)")
        let fifth = try relaunch.download(origin.url("/a.bin"), session: "flaky.test", socket: socket, as: user)
        let backoff = try eventually("the failed start to back off", timeout: 60) { () -> SessionLaunch? in
            let l = try launch("flaky.test")
            return l?.failures == 1 && l?.nextAttemptAt != nil ? l : nil
        }
        #expect(backoff.lastResult == "exitedWithoutAcknowledging" || backoff.lastResult == "failed", "\(backoff)")
        let flakyLog = manager.home + "/probe-flaky.test.log"
        let failed = try run(1, of: flakyLog), retried = try run(2, of: flakyLog)
        #expect(failed.last == "end exit 1 without acknowledging", "\(failed)")
        #expect(retried.last?.hasPrefix("end acknowledged") == true && retried.contains("didComplete \(fifth.id) ok"), "\(retried)")
        try acknowledged("flaky.test")
        #expect(relaunch.runs(log).count == 4 && relaunch.runs(flakyLog).count == 2, "nothing was started twice")

        // The agent's own log is in the user's journal.
        let journal = try manager.journalctl(["-t", "halftunesctl", "-o", "cat"])
        #expect(journal.stdout.contains("registered with halftunesd"), "\(journal.stdout)")
    }
}
