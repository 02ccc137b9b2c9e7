import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// The user units of systemd/user/ under a real systemd user manager (see SystemdUserManager): socket
/// activation, notify, restart and crash recovery through systemctl, and the daemon's journald fields.
@Suite("halftunesd under a real systemd manager", .serialized,
       .enabled(if: SystemdHost.managerUnavailableReason == nil,
                Comment(rawValue: "no systemd manager on this machine: \(SystemdHost.managerUnavailableReason ?? "")")))
struct SystemdManagerTests {
    static let service = "halftunesd.service"
    static let socket = "halftunesd.socket"

    /// Installs the repository's user units (ExecStart rewritten to the debug daemon, as `make install`
    /// does for its BINDIR) and the daemon's configuration file, then starts the socket.
    func installAndListen(_ manager: SystemdUserManager, config: String) throws -> String {
        for unit in SystemdUnitFiles.userUnits {
            try manager.installUnit((unit as NSString).lastPathComponent, contents: try SystemdUnitFiles.text(unit))
        }
        try manager.writeUserFile(manager.configHome + "/halftunesd/halftunesd.conf", contents: config)
        try manager.systemctlOK(["daemon-reload"])
        try manager.systemctlOK(["start", Self.socket])
        let socketPath = manager.runtimeDirectory + "/halftunesd/control.sock"
        #expect(FileManager.default.fileExists(atPath: socketPath), "the socket unit did not create \(socketPath)")
        // Socket activation: nothing runs until a client connects.
        #expect(try manager.property("ActiveState", of: Self.service) == "inactive")
        return socketPath
    }

    /// `halftunesctl download URL --json` through the socket; returns the new task.
    func download(_ url: String, socket: String) throws -> TaskInfo {
        let r = try ctl(["download", url, "--session", "systemd.test", "--json"], socket: socket)
        guard r.status == 0 else { throw TestFailure("halftunesctl download failed: \(r.status)\n\(r.stdout)\(r.stderr)") }
        return try JSONDecoder().decode(TaskInfo.self, from: Data(r.stdout.utf8))
    }

    func mainPID(_ manager: SystemdUserManager) throws -> Int32 {
        Int32(try manager.property("MainPID", of: Self.service)) ?? 0
    }

    @Test func socketActivationRestartCrashRecoveryAndJournal() async throws {
        try await withSystemdUserManager { manager in
            try await withOrigin { origin in try await scenario(manager, origin) }
        }
    }

    private func scenario(_ manager: SystemdUserManager, _ origin: TestOrigin) async throws {
        let socketPath = try installAndListen(manager, config: "# test\nlog-level = debug\nmax-concurrent = 2\n")
        let bodyA = TestOrigin.randomBytes(count: 6 * MiB, seed: 301)
        let bodyB = TestOrigin.randomBytes(count: 6 * MiB, seed: 302)
        origin.put("/a.bin", bodyA)
        origin.put("/b.bin", bodyB)
        origin.setBehavior("/a.bin", .throttled(1 * MiB))
        origin.setBehavior("/b.bin", .throttled(1 * MiB))

        // The first connection starts the service (Type=notify: active only after READY=1).
        let a = try download(origin.url("/a.bin"), socket: socketPath)
        try eventually("the service to be active") { try manager.property("ActiveState", of: Self.service) == "active" ? true : nil }
        let firstPID = try mainPID(manager)
        #expect(firstPID > 0)
        #expect(!(try manager.property("StatusText", of: Self.service)).isEmpty, "the daemon sent no STATUS=")
        // Defaults follow XDG in the user manager: the journal is under $XDG_STATE_HOME/halftunesd.
        #expect(FileManager.default.fileExists(atPath: manager.stateHome + "/halftunesd"))

        // `systemctl restart` mid-transfer: a clean stop checkpoints, the new process re-attaches the task.
        var client = try HalfTunesClient(socketPath: socketPath)
        try eventually("1 MiB of task \(a.id) durable") { try client.task(a.id).bytesDurable >= Int64(MiB) ? true : nil }
        try manager.systemctlOK(["restart", Self.service])
        origin.setBehavior("/a.bin", TestOrigin.Behavior())
        let secondPID = try mainPID(manager)
        #expect(secondPID > 0 && secondPID != firstPID)
        client = try HalfTunesClient(socketPath: socketPath)
        let doneA = try client.waitFor(task: a.id, state: .completed)
        #expect(try sha256(ofFile: try #require(doneA.location)) == TestOrigin.sha256Hex(bodyA))
        let resumedA = try #require(origin.requests("/a.bin").last)
        #expect(resumedA.status == 206 && (resumedA.rangeStart ?? 0) >= Int64(MiB), "not resumed: \(resumedA)")
        #expect(doneA.location?.hasPrefix(manager.downloadsDirectory + "/") == true, "\(doneA.location ?? "")")

        // `systemctl reload`: SIGHUP re-reads the configuration in the same process.
        try manager.systemctlOK(["reload", Self.service])
        #expect(try mainPID(manager) == secondPID)
        #expect(try manager.property("ActiveState", of: Self.service) == "active")

        // SIGKILL mid-transfer: Restart=on-failure brings it back and the task resumes from its checkpoint.
        let b = try download(origin.url("/b.bin"), socket: socketPath)
        try eventually("1 MiB of task \(b.id) durable") { try client.task(b.id).bytesDurable >= Int64(MiB) ? true : nil }
        let restartsBefore = Int(try manager.property("NRestarts", of: Self.service)) ?? -1
        try manager.systemctlOK(["kill", "-s", "KILL", Self.service])
        origin.setBehavior("/b.bin", TestOrigin.Behavior())
        let thirdPID = try eventually("Restart=on-failure to start a new process") { () -> Int32? in
            let pid = try mainPID(manager)
            let active = try manager.property("ActiveState", of: Self.service) == "active"
            return active && pid > 0 && pid != secondPID ? pid : nil
        }
        #expect(thirdPID != secondPID)
        #expect(Int(try manager.property("NRestarts", of: Self.service)) == restartsBefore + 1)
        client = try HalfTunesClient(socketPath: socketPath)
        let doneB = try client.waitFor(task: b.id, state: .completed)
        #expect(try sha256(ofFile: try #require(doneB.location)) == TestOrigin.sha256Hex(bodyB))
        let resumedB = try #require(origin.requests("/b.bin").last)
        #expect(resumedB.status == 206 && (resumedB.rangeStart ?? 0) >= Int64(MiB), "not resumed: \(resumedB)")

        // journald: the daemon's lines about task A carry HALFTUNES_TASK and come from the unit.
        let journal = try manager.journalctl(["HALFTUNES_TASK=\(a.id)", "-o", "json"])
        #expect(journal.status == 0, "\(journal)")
        let entries = journal.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        #expect(!entries.isEmpty, "no journal entry with HALFTUNES_TASK=\(a.id):\n\(manager.journalText())")
        for entry in entries {
            #expect(entry["_SYSTEMD_UNIT"] as? String == Self.service, "\(entry)")
            #expect(entry["HALFTUNES_TASK"] as? String == "\(a.id)")
            #expect(!((entry["MESSAGE"] as? String) ?? "").isEmpty)
        }
        // Lines from before and after the restart: two different processes logged about the task.
        let pids = Set(entries.compactMap { $0["_PID"] as? String })
        #expect(pids.count >= 2, "expected lines from both processes, got pids \(pids)")
        let byUnit = try manager.journalctl(["-u", Self.service, "HALFTUNES_TASK=\(b.id)", "-o", "cat"])
        #expect(byUnit.status == 0 && !byUnit.stdout.isEmpty, "\(byUnit)")
    }

    /// systemd/halftunesd.service itself, with its whole sandbox, under a root manager. Drop-ins stand in
    /// for what only a real system has: user nobody for halftunesd, the state directory under the manager's
    /// XDG_CONFIG_HOME (where StateDirectory= points in a --user manager), the socket in the test directory.
    @Test(.enabled(if: SystemdHost.systemUnitUnavailableReason == nil,
                   Comment(rawValue: SystemdHost.systemUnitUnavailableReason ?? "")))
    func systemUnitWithItsSandboxServesDownloads() async throws {
        try await withSystemdUserManager(.root) { manager in
            try await withOrigin { origin in try systemUnitScenario(manager, origin) }
        }
    }

    private func systemUnitScenario(_ manager: SystemdUserManager, _ origin: TestOrigin) throws {
        for unit in SystemdUnitFiles.systemUnits {
            try manager.installUnit(unit, contents: try SystemdUnitFiles.text(unit))
        }
        let state = manager.configHome + "/halftunesd"
        let socketPath = manager.base.path + "/control.sock"
        try manager.installUnit("halftunesd.service.d/test.conf", contents: """
            [Service]
            User=nobody
            Group=nogroup
            Environment=XDG_STATE_HOME=\(manager.configHome) XDG_DOWNLOAD_DIR=\(state)/downloads XDG_CONFIG_HOME=\(manager.base.path)/etc
            """)
        try manager.installUnit("halftunesd.socket.d/test.conf", contents: """
            [Socket]
            ListenStream=
            ListenStream=\(socketPath)
            SocketGroup=
            """)
        try manager.systemctlOK(["daemon-reload"])
        try manager.systemctlOK(["start", Self.socket])
        let body = TestOrigin.randomBytes(count: 3 * MiB, seed: 303)
        origin.put("/sys.bin", body)
        let task = try download(origin.url("/sys.bin"), socket: socketPath)
        let done = try HalfTunesClient(socketPath: socketPath).waitFor(task: task.id, state: .completed)
        let location = try #require(done.location)
        #expect(location.hasPrefix(state + "/downloads/"), "\(location)")
        #expect(try sha256(ofFile: location) == TestOrigin.sha256Hex(body))

        // The sandbox is in force on the running daemon.
        let pid = try mainPID(manager)
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        func field(_ name: String) -> String? {
            status.split(separator: "\n").first { $0.hasPrefix(name + ":") }
                .map { $0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces) }
        }
        let nobody = try #require(SystemdHost.managerUser)
        #expect(field("Uid")?.split(separator: "\t").first.map(String.init) == "\(nobody.uid)", "\(status)")
        #expect(field("CapBnd") == "0000000000000000", "\(status)")
        #expect(field("CapEff") == "0000000000000000", "\(status)")
        #expect(field("NoNewPrivs") == "1")
        #expect(field("Seccomp") == "2")
        let mounts = try String(contentsOfFile: "/proc/\(pid)/mountinfo", encoding: .utf8)
        let root = mounts.split(separator: "\n").map { $0.split(separator: " ") }.last { $0.count > 5 && $0[4] == "/" }
        #expect(root.map { $0[5].split(separator: ",").contains("ro") } == true, "ProtectSystem=strict: / is not read-only")

        let journal = try manager.journalctl(["HALFTUNES_TASK=\(task.id)", "-o", "json"])
        let units = journal.stdout.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["_SYSTEMD_UNIT"] as? String
        }
        #expect(!units.isEmpty && units.allSatisfy { $0 == Self.service }, "\(journal)")
    }

    /// With exit-when-idle the daemon exits once nothing is pending, and the socket starts it again.
    @Test func exitWhenIdleThenStartedAgainBySocket() async throws {
        try await withSystemdUserManager { manager in
            let socketPath = try installAndListen(manager, config: "exit-when-idle = 1\n")
            let first = try ctl(["status"], socket: socketPath)
            #expect(first.status == 0, "\(first.stderr)")
            let firstPID = try eventually("a main pid") { () -> Int32? in
                let pid = try mainPID(manager)
                return pid > 0 ? pid : nil
            }
            try eventually("the idle daemon to exit", timeout: 60) { () -> Bool? in
                try manager.property("ActiveState", of: Self.service) == "inactive" ? true : nil
            }
            // A clean, intended exit: not a failure, and not restarted by Restart=on-failure.
            #expect(try manager.property("Result", of: Self.service) == "success")
            #expect(try manager.property("NRestarts", of: Self.service) == "0")
            #expect(try manager.property("ActiveState", of: Self.socket) == "active")
            let second = try ctl(["status"], socket: socketPath)
            #expect(second.status == 0, "\(second.stderr)")
            // ExecMainPID keeps the last main pid after it exited: the second daemon may already have
            // exited again for idleness (1 s) by the time we look.
            let secondPID = try eventually("a new main pid") { () -> Int32? in
                let pid = Int32(try manager.property("ExecMainPID", of: Self.service)) ?? 0
                return pid > 0 && pid != firstPID ? pid : nil
            }
            #expect(secondPID != firstPID)
        }
    }
}
