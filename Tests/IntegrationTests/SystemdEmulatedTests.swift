import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// The daemon under an emulated service manager: `systemd-socket-activate` passes the listening socket
/// (fd 3, named `control`) and a test-owned NOTIFY_SOCKET receives READY/STATUS/RELOADING/STOPPING/WATCHDOG.
@Suite("systemd: socket activation, sd_notify, watchdog, reload, idle exit (emulated manager)", .serialized)
struct SystemdEmulatedTests {
    static func isReady(_ m: NotifyMessage) -> Bool { m["READY"] == "1" }

    @Test func firstConnectionStartsTheDaemonAndReadyMeansItAnswers() async throws {
        try await withNotifyDaemon { daemon, _ in
            #expect(!daemon.daemonHasStarted, "halftunesd started before anyone connected")
            #expect(daemon.notify.messages.isEmpty)
            let client = try daemon.client() // the activator execs halftunesd now
            let status = try client.status()
            #expect(status.pid == daemon.pid)
            #expect(daemon.daemonHasStarted)
            #expect(status.socketPath == daemon.socketPath)
            let ready = try daemon.notify.wait(for: "READY=1", Self.isReady)
            #expect(ready["STATUS"] == "0 running, 0 queued, 0 B/s")
            // Once READY=1 is out, new connections are answered.
            #expect(try daemon.client().status().pid == daemon.pid)
            #expect(daemon.notify.messages(with: "READY").count == 1)
            // It served the socket it was given: it bound nothing itself.
            #expect(!FileManager.default.fileExists(atPath: daemon.unusedSocketPath))
            // No WATCHDOG_USEC, no pings.
            #expect(daemon.notify.messages(with: "WATCHDOG").isEmpty)
        }
    }

    @Test func statusFollowsADownload() async throws {
        try await withNotifyDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 3 * MiB, seed: 31)
            origin.put("/status.bin", body)
            origin.setBehavior("/status.bin", .throttled(1 * MiB))
            let client = try daemon.client()
            _ = try client.status()
            let ready = try daemon.notify.wait(for: "READY=1", Self.isReady)
            let t = try client.startDownload(origin.url("/status.bin"))
            let busy = try daemon.notify.wait(for: "STATUS with 1 running and a rate", after: ready.index) {
                guard let s = $0["STATUS"] else { return false }
                return s.hasPrefix("1 running, 0 queued, ") && !s.hasSuffix(" 0 B/s")
            }
            try client.waitFor(task: t.id, state: .completed)
            try daemon.notify.wait(for: "STATUS back to nothing running", after: busy.index) {
                $0["STATUS"]?.hasPrefix("0 running, 0 queued, ") == true
            }
        }
    }

    @Test func watchdogPingsRepeatedlyWhileServing() async throws {
        try await withNotifyDaemon(watchdogUSec: 400_000) { daemon, _ in
            let client = try daemon.client()
            _ = try client.status()
            let ready = try daemon.notify.wait(for: "READY=1", Self.isReady)
            _ = try eventually("10 WATCHDOG=1 pings") {
                daemon.notify.messages(with: "WATCHDOG", "1").filter { $0.index > ready.index }.count >= 10 ? true : nil
            }
            #expect(try client.status().pid == daemon.pid)
        }
    }

    @Test func sigtermSendsStoppingAndTheTaskContinuesOnTheNextStart() async throws {
        try await withNotifyDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 6 * MiB, seed: 32)
            origin.put("/term.bin", body)
            origin.setBehavior("/term.bin", .throttled(2 * MiB))
            var client = try daemon.client()
            let t = try client.startDownload(origin.url("/term.bin"))
            _ = try eventually("1 MiB durable") { try client.task(t.id).bytesDurable >= Int64(MiB) ? true : nil }
            daemon.send(SIGTERM)
            let stopping = try daemon.notify.wait(for: "STOPPING=1") { $0["STOPPING"] == "1" }
            #expect(try daemon.waitForExit() == 0)
            #expect(FileManager.default.fileExists(atPath: daemon.socketPath),
                    "halftunesd removed the socket file the manager created")
            let servedBefore = origin.bytesServed("/term.bin")
            origin.setBehavior("/term.bin", TestOrigin.Behavior())

            try daemon.launch()
            client = try daemon.client()
            #expect(try client.task(t.id).bytesDurable >= Int64(MiB))
            let ready = try daemon.notify.wait(for: "READY=1 after the restart", after: stopping.index, Self.isReady)
            // The journal was replayed before READY=1: the interrupted task was already running again.
            #expect(ready["STATUS"]?.hasPrefix("1 running, 0 queued") == true, "\(ready)")
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let resumed = try #require(origin.requests("/term.bin").last)
            #expect(resumed.status == 206)
            #expect(try #require(resumed.rangeStart) >= Int64(MiB))
            #expect(servedBefore < Int64(body.count))
        }
    }

    @Test func exitWhenIdleWaitsForClientsAndPendingDownloads() async throws {
        // WATCHDOG=1 every 0.1 s serves as the daemon's own clock.
        try await withNotifyDaemon(args: ["--exit-when-idle", "1"], watchdogUSec: 200_000) { daemon, origin in
            let body = TestOrigin.randomBytes(count: 3 * MiB, seed: 33)
            origin.put("/idle.bin", body)
            origin.setBehavior("/idle.bin", .throttled(1 * MiB))
            let client = try daemon.client()
            _ = try client.openSession("test.session")
            let parked = try client.createTask(TaskCreateParams(session: "test.session", url: origin.url("/idle.bin"),
                                                                destination: "parked.bin"))
            #expect(parked.state == .suspended)
            // A connected client keeps the daemon running, well past the idle period.
            let pings = daemon.notify.messages(with: "WATCHDOG").count
            _ = try eventually("20 more watchdog pings (at least 2 s of the daemon's time)") {
                daemon.notify.messages(with: "WATCHDOG").count >= pings + 20 ? true : nil
            }
            #expect(daemon.isRunning)
            #expect(daemon.notify.messages(with: "STOPPING").isEmpty)

            // A pending download keeps it running with no client at all (3 MiB at 1 MiB/s > 1 s idle).
            let t = try client.createTask(TaskCreateParams(session: "test.session", url: origin.url("/idle.bin"),
                                                           start: true))
            client.close()
            _ = try eventually("the download to complete with no client connected") {
                FileManager.default.fileExists(atPath: t.destination) ? true : nil
            }
            #expect(try sha256(ofFile: t.destination) == TestOrigin.sha256Hex(body))

            // Then only a suspended task is left: it exits, cleanly.
            #expect(try daemon.waitForExit() == 0)
            try daemon.notify.wait(for: "STOPPING=1") { $0["STOPPING"] == "1" }

            // The next connection starts it again, with everything kept.
            try daemon.launch()
            let again = try daemon.client()
            #expect(try again.task(parked.id).state == .suspended)
            #expect(try again.task(t.id).state == .completed)
        }
    }

    @Test func sighupReloadsTheConfiguration() async throws {
        try await withNotifyDaemon(config: "max-concurrent = 2\nlog-level = info\n") { daemon, origin in
            origin.put("/small.bin", TestOrigin.randomBytes(count: 64 * 1024, seed: 34))
            let client = try daemon.client()
            #expect(try client.status().maxConcurrent == 2)
            let ready = try daemon.notify.wait(for: "READY=1", Self.isReady)
            let first = try client.startDownload(origin.url("/small.bin"), destination: "first.bin")
            try client.waitFor(task: first.id, state: .completed)
            #expect(!daemon.log().contains("<7>"), "debug lines at log-level info")

            try daemon.writeConfig("# reloaded\nmax-concurrent = 5\nlog-level = debug\n")
            let before = monotonicMicroseconds()
            daemon.send(SIGHUP)
            let reloading = try daemon.notify.wait(for: "RELOADING=1", after: ready.index) { $0["RELOADING"] == "1" }
            let usec = try #require(reloading["MONOTONIC_USEC"].flatMap { UInt64($0) })
            #expect(usec >= before && usec <= monotonicMicroseconds())
            try daemon.notify.wait(for: "READY=1 after RELOADING=1", after: reloading.index, Self.isReady)
            #expect(try client.status().maxConcurrent == 5)
            let second = try client.startDownload(origin.url("/small.bin"), destination: "second.bin")
            try client.waitFor(task: second.id, state: .completed)
            _ = try eventually("a debug line once log-level is debug") { daemon.log().contains("<7>transfer started") ? true : nil }

            // A proxy set by a reload holds the next attempts (nobody answers on it); a bypass for the origin
            // added by the next reload lets them through.
            let deadPort = try freeLoopbackPort()
            try daemon.writeConfig("max-concurrent = 5\nlog-level = debug\nproxy = http://user:pw@127.0.0.1:\(deadPort)\n")
            var lastReady = try #require(daemon.notify.messages(with: "READY").last)
            daemon.send(SIGHUP)
            var reload = try daemon.notify.wait(for: "RELOADING=1 for the proxy", after: lastReady.index) { $0["RELOADING"] == "1" }
            try daemon.notify.wait(for: "READY=1 after the proxy", after: reload.index, Self.isReady)
            #expect(try client.status().proxy == "http://user:***@127.0.0.1:\(deadPort) for http and https (configuration)")
            let held = try client.startDownload(origin.url("/small.bin"), destination: "held.bin")
            let reason = try eventually("the download to wait for the proxy") {
                try client.task(held.id).waitingReason.flatMap { $0.code == TaskErrorCode.proxyFailure ? $0 : nil }
            }
            #expect(reason.message.contains("Cannot connect to the proxy http://user:***@127.0.0.1:\(deadPort)"), "\(reason)")
            try daemon.writeConfig("max-concurrent = 5\nlog-level = debug\nproxy = http://user:pw@127.0.0.1:\(deadPort)\nproxy-bypass = 127.0.0.1\n")
            lastReady = try #require(daemon.notify.messages(with: "READY").last)
            daemon.send(SIGHUP)
            reload = try daemon.notify.wait(for: "RELOADING=1 for the bypass", after: lastReady.index) { $0["RELOADING"] == "1" }
            try daemon.notify.wait(for: "READY=1 after the bypass", after: reload.index, Self.isReady)
            _ = try client.resume(held.id)
            try client.waitFor(task: held.id, state: .completed)
            #expect(!daemon.log().contains(":pw@"), "the password is never logged")

            // A broken file changes nothing; the reload still ends with READY=1.
            try daemon.writeConfig("max-concurrent = 3\nbogus = 1\n")
            lastReady = try #require(daemon.notify.messages(with: "READY").last)
            daemon.send(SIGHUP)
            let again = try daemon.notify.wait(for: "second RELOADING=1", after: lastReady.index) { $0["RELOADING"] == "1" }
            try daemon.notify.wait(for: "READY=1 after the failed reload", after: again.index, Self.isReady)
            #expect(try client.status().maxConcurrent == 5)
            #expect(daemon.log().contains("halftunesd.conf:2: unknown key 'bogus'"))
            #expect(daemon.isRunning)
        }
    }
}

@Suite("Configuration and logging at start-up")
struct DaemonStartupConfigTests {
    /// Runs halftunesd expecting it to refuse to start; returns its exit status and stderr.
    func refusedStart(_ args: [String]) throws -> (status: Int32, stderr: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Binaries.daemon)
        p.arguments = args
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let data = err.fileHandleForReading.readDataToEndOfFile() // EOF once it exits
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test func configurationErrorsNameTheFileAndLine() throws {
        let dir = try TempDir()
        let conf = dir.path + "/halftunesd.conf"
        try "# fine\nmax-concurrent = 4\nmax_concurent = 5\n".write(toFile: conf, atomically: true, encoding: .utf8)
        let common = ["--state-dir", dir.path + "/state", "--socket", dir.path + "/c.sock"]
        let bad = try refusedStart(["--config", conf] + common)
        #expect(bad.status == 1)
        #expect(bad.stderr.contains("\(conf):3: unknown key 'max_concurent'"), "\(bad.stderr)")

        let missing = try refusedStart(["--config", dir.path + "/missing.conf"] + common)
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("missing.conf: cannot read the configuration file: No such file or directory"))

        let flag = try refusedStart(["--config", "/dev/null", "--max-concurrent", "0"] + common)
        #expect(flag.status != 0)
        #expect(flag.stderr.contains("--max-concurrent must be an integer from 1 to 1000 (got '0')"), "\(flag.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/c.sock"))
    }

    @Test(.enabled(if: !FileManager.default.fileExists(atPath: "/run/systemd/journal/socket"),
                   "shows the stderr fallback, which needs a machine where journald is not running"))
    func withJournalStreamButNoJournaldLinesGoToStderr() throws {
        let daemon = try DaemonProcess(extraArgs: ["--config", "/dev/null"], start: false)
        _ = FileManager.default.createFile(atPath: daemon.logPath, contents: nil)
        var st = stat()
        #expect(stat(daemon.logPath, &st) == 0)
        daemon.environment["JOURNAL_STREAM"] = "\(st.st_dev):\(st.st_ino)" // stderr is that file
        try daemon.start()
        let log = daemon.log()
        #expect(log.contains("<4>journald does not take log records"), "\(log)")
        #expect(log.contains("<6>halftunesd \(HalfTunes.version) ready"), "\(log)")
        #expect(try daemon.terminate().status == 0)
    }

    @Test func plainStderrLinesCarryPriorityPrefixesAndTaskMetadata() async throws {
        try await withDaemon(["--config", "/dev/null"]) { daemon, origin in
            origin.put("/meta.bin", TestOrigin.randomBytes(count: 1000, seed: 35))
            let client = try daemon.client()
            let t = try client.startDownload(origin.url("/meta.bin"))
            try client.waitFor(task: t.id, state: .completed)
            let lines = daemon.log().split(separator: "\n")
            #expect(lines.contains { $0.hasPrefix("<6>task created ") && $0.contains(" task=\(t.id) ") })
            #expect(lines.contains { $0.hasPrefix("<6>download complete ") && $0.contains(" task=\(t.id)") })
            #expect(lines.contains { $0.hasPrefix("<7>transfer started ") && $0.contains(" task=\(t.id)") })
        }
    }
}

func monotonicMicroseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
}
