// A session's launchUnit under a real systemd user manager: the daemon starts the client for events that wait,
// again with backoff until they are acknowledged, and never for acknowledged ones.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Relaunching a session's client", .serialized,
       .enabled(if: SystemdHost.managerUnavailableReason == nil,
                Comment(rawValue: "no systemd manager on this machine: \(SystemdHost.managerUnavailableReason ?? "")")))
struct RelaunchTests {
    static var probe: String { Binaries.directory + "/halftunes-event-probe" }

    /// The repository's user units, the daemon's configuration, and two probe templates: `htd-probe@` handles
    /// its session's events and acknowledges; `htd-probe-flaky@` exits 1 without acknowledging the first time.
    func install(_ manager: SystemdUserManager) throws -> String {
        for unit in SystemdUnitFiles.userUnits {
            try manager.installUnit((unit as NSString).lastPathComponent, contents: try SystemdUnitFiles.text(unit))
        }
        try manager.writeUserFile(manager.configHome + "/halftunesd/halftunesd.conf", contents: "log-level = debug\n")
        let socket = manager.runtimeDirectory + "/halftunesd/control.sock"
        try Self.installProbes(manager, socket: socket)
        try manager.systemctlOK(["daemon-reload"])
        try manager.systemctlOK(["start", "halftunesd.socket"])
        return socket
    }

    /// The probe templates, for the daemon on `socket`: `htd-probe@` handles its session's events and acknowledges;
    /// `htd-probe-flaky@` exits 1 without acknowledging the first time. Each writes `probe-<session>.log` in the home.
    static func installProbes(_ manager: SystemdUserManager, socket: String) throws {
        for (name, extra) in [("htd-probe@.service", ""), ("htd-probe-flaky@.service", " --fail-first \(manager.home)/flaky-%i.marker")] {
            try manager.installUnit(name, contents: """
                [Unit]
                Description=halftunesd relaunch probe for %I

                [Service]
                Type=oneshot
                ExecStart=\(Self.probe) --socket \(socket) --session %I --out \(manager.home)/probe-%i.log\(extra)

                """)
        }
    }

    func session(_ id: String, socket: String, as user: (uid: UInt32, gid: UInt32)) throws -> SessionInfo {
        let r = try ctl(["session", "show", id, "--json"], socket: socket, asUser: user)
        guard r.status == 0 else { throw TestFailure("session show: \(r.stdout)\(r.stderr)") }
        return try JSONDecoder().decode(SessionInfo.self, from: Data(r.stdout.utf8))
    }

    func download(_ url: String, session: String, socket: String, as user: (uid: UInt32, gid: UInt32)) throws -> TaskInfo {
        let r = try ctl(["download", url, "--session", session, "--json"], socket: socket, asUser: user)
        guard r.status == 0 else { throw TestFailure("download: \(r.status)\n\(r.stdout)\(r.stderr)") }
        return try JSONDecoder().decode(TaskInfo.self, from: Data(r.stdout.utf8))
    }

    /// The probe's log split into runs: each run's lines without its "run" header.
    func runs(_ path: String) -> [[String]] {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        var runs: [[String]] = []
        for line in text.split(separator: "\n").map(String.init) {
            if line.hasPrefix("run ") { runs.append([]) } else if !runs.isEmpty { runs[runs.count - 1].append(line) }
        }
        return runs
    }

    @Test func theUnitIsStartedForWaitingEventsUntilTheyAreAcknowledged() async throws {
        try await withSystemdUserManager { manager in
            try await withOrigin { origin in try await scenario(manager, origin) }
        }
    }

    private func scenario(_ manager: SystemdUserManager, _ origin: TestOrigin) async throws {
        let socket = try install(manager)
        let user = (uid: manager.uid, gid: manager.gid)
        let body = TestOrigin.randomBytes(count: 128 * 1024, seed: 401)
        origin.put("/r.bin", body)

        // A download completes while no client runs: the unit is started, and its client gets the events.
        let opened = try ctl(["session", "open", "relaunch.test", "--launch-unit", "htd-probe@.service"], socket: socket, asUser: user)
        #expect(opened.status == 0, "\(opened.stdout)\(opened.stderr)")
        #expect(opened.stdout.contains("htd-probe@relaunch.test.service; not started yet"), "\(opened.stdout)")
        // A subscriber holds the unit back until the download completed, so the first run (which stops at the end of
        // what is there when it subscribes) gets every event of it, however fast the unit starts.
        let client = try HalfTunesClient(socketPath: socket) // root names the user's session with its uid
        let firstHolder = try client.events(session: "\(manager.uid)/relaunch.test", after: 0)
        let task = try download(origin.url("/r.bin"), session: "relaunch.test", socket: socket, as: user)
        while let event = try firstHolder.nextEvent(), !(event.task == task.id && event.payload.isDidComplete) {}
        firstHolder.close()
        let log = manager.home + "/probe-relaunch.test.log"
        let first = try eventually("the probe to acknowledge", timeout: 60) { () -> [String]? in
            guard let run = runs(log).first, run.last?.hasPrefix("end") == true else { return nil }
            return run
        }
        #expect(first.last?.hasPrefix("end acknowledged") == true, "\(first)")
        let finished = try #require(first.first { $0.hasPrefix("didFinishDownloading \(task.id) ") })
        let location = String(finished.dropFirst("didFinishDownloading \(task.id) ".count))
        #expect(try sha256(ofFile: location) == TestOrigin.sha256Hex(body))
        #expect(first.contains("didComplete \(task.id) ok"))
        #expect(first.contains { $0.hasPrefix("didFinishEvents") })
        let done = try eventually("the launch to be recorded as acknowledged", timeout: 30) { () -> SessionInfo? in
            let s = try session("relaunch.test", socket: socket, as: user)
            return s.launch?.lastResult == "acknowledged" ? s : nil
        }
        #expect(done.ackedThrough == done.lastEventSeq && done.launch?.failures == 0 && done.launch?.nextAttemptAt == nil)
        let launchedAt = try #require(done.launch?.lastLaunchAt)

        // Nothing is started again for acknowledged events: a subscriber that comes and goes, a restart.
        let stream = try client.events(session: "\(manager.uid)/relaunch.test", after: 0)
        while let event = try stream.nextEvent(), !event.isDidFinishEvents {}
        stream.close()
        #expect(try session("relaunch.test", socket: socket, as: user).launch?.lastLaunchAt == launchedAt)
        try manager.systemctlOK(["restart", "halftunesd.service"])
        let after = try session("relaunch.test", socket: socket, as: user)
        #expect(after.launch?.lastLaunchAt == launchedAt && after.launch?.lastResult == "acknowledged")
        #expect(runs(log).count == 1)

        // The journal has each start and its outcome with HALFTUNES_SESSION.
        let journal = try manager.journalctl(["HALFTUNES_SESSION=\(manager.uid)/relaunch.test", "-o", "cat"])
        #expect(journal.stdout.contains("starting the session's launch unit"), "\(journal.stdout)")
        #expect(journal.stdout.contains("the session's launch unit ended"), "\(journal.stdout)")

        // A client that exits 1 without acknowledging is started again after the backoff, with the same events.
        let flaky = try ctl(["session", "open", "flaky.test", "--launch-unit", "htd-probe-flaky@.service"], socket: socket, asUser: user)
        #expect(flaky.status == 0, "\(flaky.stdout)\(flaky.stderr)")
        // A subscriber holds the unit back until the download completed: the first run (which stops at the end of
        // what is there when it subscribes) then gets every event of it, as the second must too.
        let holder = try client.events(session: "\(manager.uid)/flaky.test", after: 0)
        let second = try download(origin.url("/r.bin"), session: "flaky.test", socket: socket, as: user)
        while let event = try holder.nextEvent(), !(event.task == second.id && event.payload.isDidComplete) {}
        holder.close()
        let backoff = try eventually("the failed start to back off", timeout: 60) { () -> SessionLaunch? in
            let launch = try session("flaky.test", socket: socket, as: user).launch
            return launch?.failures == 1 && launch?.nextAttemptAt != nil ? launch : nil
        }
        #expect(backoff.lastResult == "failed", "\(backoff)")
        let failedAt = try #require(backoff.lastLaunchAt.flatMap(Timestamp.parse))
        let nextAt = try #require(backoff.nextAttemptAt.flatMap(Timestamp.parse))
        #expect(nextAt - failedAt >= 10, "the first backoff is 10 s after the start that failed")
        let flakyLog = manager.home + "/probe-flaky.test.log"
        let both = try eventually("the second run to acknowledge", timeout: 60) { () -> [[String]]? in
            let r = runs(flakyLog)
            return r.count == 2 && r[1].last?.hasPrefix("end") == true ? r : nil
        }
        #expect(both[0].last == "end exit 1 without acknowledging")
        #expect(both[1].last?.hasPrefix("end acknowledged") == true, "\(both[1])")
        let events = { (run: [String]) in run.filter { $0.hasPrefix("didFinishDownloading") || $0.hasPrefix("didComplete") } }
        #expect(events(both[0]) == events(both[1]) && events(both[1]).contains("didComplete \(second.id) ok"))
        let settled = try eventually("the flaky launch to be acknowledged", timeout: 30) { () -> SessionInfo? in
            let s = try session("flaky.test", socket: socket, as: user)
            return s.launch?.lastResult == "acknowledged" ? s : nil
        }
        #expect(settled.launch?.failures == 0 && settled.ackedThrough == settled.lastEventSeq)
    }
}
