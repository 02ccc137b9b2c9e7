// A full disk (ENOSPC, a small tmpfs) and a file size limit (EFBIG, RLIMIT_FSIZE) through the real daemon.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Disk full and file too large", .serialized)
struct DiskFullTests {
    /// halftunesd runs under `prlimit --fsize` (soft limit 4 MiB, above its journal, below the 10 MiB download):
    /// the task waits with `fileTooLarge` and keeps its durable prefix, the journal and other tasks go on, and
    /// once the limit is raised on the live process `halftunesctl resume` finishes the file from that prefix.
    @Test func overTheFileSizeLimitTheTaskWaitsAndCompletesOnceRaised() async throws {
        let limit = 4 * MiB
        let origin = try await TestOrigin.start()
        let daemon = try DaemonProcess(start: false)
        daemon.launcher = ["/usr/bin/prlimit", "--fsize=\(limit):unlimited"]
        try await running(daemon, origin) {
            try daemon.start()
            let body = TestOrigin.randomBytes(count: 10 * MiB + 5, seed: 601)
            let small = TestOrigin.randomBytes(count: 200_000, seed: 602)
            origin.put("/big.bin", body)
            origin.put("/small.bin", small)
            let client = try daemon.client()
            _ = try client.openSession("fsize", configuration: SessionConfiguration(
                retry: RetryPolicy(initialDelay: 3600, jitter: 0)))
            let t = try client.startTask(origin.url("/big.bin"), session: "fsize")
            let waiting = try client.waitFor(task: t.id, state: .waiting)
            #expect(waiting.waitingReason?.code == TaskErrorCode.fileTooLarge, "\(String(describing: waiting.waitingReason))")
            #expect(waiting.waitingReason?.message.contains("File too large") == true)
            #expect(waiting.bytesDurable == Int64(limit))
            try expectPartial(in: daemon.downloadsDir, isPrefixOf: body, length: limit)

            // Nothing else is harmed: the journal (below the limit) records, other tasks run, the CLI answers.
            let s = try client.startTask(origin.url("/small.bin"), session: "fsize")
            let smallDone = try client.waitFor(task: s.id, state: .completed)
            #expect(try sha256(ofFile: smallDone.location!) == TestOrigin.sha256Hex(small))
            let journalSizes = try stateFileSizes(daemon.stateDir)
            #expect(journalSizes.values.allSatisfy { $0 < limit }, "journal files must stay below the limit: \(journalSizes)")
            let show = try ctl(["show", String(t.id)], socket: daemon.socketPath)
            #expect(show.stdout.contains("fileTooLarge") && show.stdout.contains("retrying in"), "\(show.stdout)")

            let raised = try runTool("/usr/bin/prlimit", ["--pid", String(daemon.pid), "--fsize=unlimited:unlimited"])
            #expect(raised == 0)
            let resumed = try ctl(["resume", String(t.id)], socket: daemon.socketPath)
            #expect(resumed.status == 0, "\(resumed.stderr)")
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            let requests = origin.requests("/big.bin")
            #expect(requests.count == 2)
            #expect(requests.last?.range == "bytes=\(limit)-")
            #expect(requests.last?.status == 206)
            #expect(daemon.isRunning)
        }
    }

    /// The downloads directory is a 3 MiB tmpfs in the daemon's own mount namespace. An 8 MiB download reserves
    /// its first window before writing (fallocate), which would leave less than min-free-space (auto: 5 % of 3 MiB),
    /// so it waits with `diskFull` at once, with no byte written, instead
    /// of filling the disk first; the failed reservation gives the space back (a 2 MiB file into the same tmpfs
    /// completes), other tasks go on, and after the tmpfs is grown `halftunesctl resume` completes the file.
    @Test(.enabled(if: DiskFullTests.canMountTmpfs, "needs unshare --mount and tmpfs mounts (root)"))
    func onAFullDiskTheTaskWaitsAtOnceAndCompletesOnceSpaceIsFreed() async throws {
        let origin = try await TestOrigin.start()
        let daemon = try DaemonProcess(start: false)
        let downloads = daemon.downloadsDir
        daemon.launcher = ["/usr/bin/unshare", "--mount", "/bin/sh", "-c",
                           "mount -t tmpfs -o size=3m tmpfs \"$0\" && exec \"$@\"", downloads]
        try await running(daemon, origin) {
            try daemon.start()
            let inDaemon = "/proc/\(daemon.pid)/root" + downloads // the daemon's view of its tmpfs
            let body = TestOrigin.randomBytes(count: 8 * MiB + 1, seed: 603)
            let fits = TestOrigin.randomBytes(count: 2 * MiB, seed: 605)
            let small = TestOrigin.randomBytes(count: 100_000, seed: 604)
            origin.put("/huge.bin", body)
            origin.put("/fits.bin", fits)
            origin.put("/small.bin", small)
            let elsewhere = daemon.dir.path + "/elsewhere"
            try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
            let client = try daemon.client()
            _ = try client.openSession("full", configuration: SessionConfiguration(
                retry: RetryPolicy(initialDelay: 3600, jitter: 0)))
            let t = try client.startTask(origin.url("/huge.bin"), session: "full")
            let waiting = try client.waitFor(task: t.id, state: .waiting)
            #expect(waiting.waitingReason?.code == TaskErrorCode.diskFull, "\(String(describing: waiting.waitingReason))")
            #expect(waiting.waitingReason?.message.contains("min-free-space") == true,
                    "\(String(describing: waiting.waitingReason?.message))")
            #expect(waiting.bytesDurable == 0)
            try expectPartial(in: inDaemon, isPrefixOf: body, length: 0)

            let f = try client.startTask(origin.url("/fits.bin"), session: "full")
            let fitsDone = try client.waitFor(task: f.id, state: .completed)
            #expect(try sha256(ofFile: "/proc/\(daemon.pid)/root" + fitsDone.location!) == TestOrigin.sha256Hex(fits))
            #expect(try runTool("/usr/bin/nsenter", ["--target", String(daemon.pid), "--mount", "rm", fitsDone.location!]) == 0)

            let s = try client.createTask(TaskCreateParams(session: "full", url: origin.url("/small.bin"),
                                                           destination: elsewhere + "/small.bin", start: true))
            let smallDone = try client.waitFor(task: s.id, state: .completed)
            #expect(try sha256(ofFile: smallDone.location!) == TestOrigin.sha256Hex(small))
            let list = try ctl(["list"], socket: daemon.socketPath)
            #expect(list.stdout.contains("waiting (diskFull, in "), "\(list.stdout)")

            let grown = try runTool("/usr/bin/nsenter", ["--target", String(daemon.pid), "--mount",
                                                          "mount", "-o", "remount,size=64m", downloads])
            #expect(grown == 0)
            let resumed = try ctl(["resume", String(t.id)], socket: daemon.socketPath)
            #expect(resumed.status == 0, "\(resumed.stderr)")
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(done.location == downloads + "/huge.bin")
            #expect(try sha256(ofFile: "/proc/\(daemon.pid)/root" + done.location!) == TestOrigin.sha256Hex(body))
            let requests = origin.requests("/huge.bin")
            #expect(requests.count == 2 && requests.allSatisfy { $0.range == nil }, "nothing was kept, so no Range")
            #expect(!FileManager.default.fileExists(atPath: downloads + "/huge.bin"), "the tmpfs is the daemon's alone")
        }
    }

    /// The state directory is a 4 MiB tmpfs in the daemon's own mount namespace, with `state-min-free-space 2M`.
    /// Filled to below that by something else, the calls that would add to the journal (task.create, a new
    /// session, task.resume) are refused with `limitExceeded` in words, before the journal could meet ENOSPC,
    /// while reads, pauses and cancels work; once the space is freed, everything goes on.
    @Test(.enabled(if: DiskFullTests.canMountTmpfs, "needs unshare --mount and tmpfs mounts (root)"))
    func belowTheStateFloorNewWorkIsRefusedAndTheRestGoesOn() async throws {
        let origin = try await TestOrigin.start()
        let daemon = try DaemonProcess(extraArgs: ["--state-min-free-space", "2M"], start: false)
        let state = daemon.stateDir
        daemon.launcher = ["/usr/bin/unshare", "--mount", "/bin/sh", "-c",
                           "mkdir -p \"$0\" && mount -t tmpfs -o size=4m,mode=700 tmpfs \"$0\" && exec \"$@\"", state]
        try await running(daemon, origin) {
            try daemon.start()
            let body = TestOrigin.randomBytes(count: 100_000, seed: 606)
            origin.put("/f.bin", body)
            let client = try daemon.client()
            _ = try client.openSession("floor")
            let kept = try client.createTask(TaskCreateParams(session: "floor", url: origin.url("/f.bin"), destination: "kept.bin"))
            let other = try client.createTask(TaskCreateParams(session: "floor", url: origin.url("/f.bin"), destination: "other.bin"))
            // Something else fills the state file system to 1 MiB free.
            let filler = state + "/filler"
            func inDaemon(_ args: [String]) throws -> Int32 {
                try runTool("/usr/bin/nsenter", ["--target", String(daemon.pid), "--mount"] + args)
            }
            #expect(try inDaemon(["sh", "-c", "used=$(du -sk \"$0\" | cut -f1); dd if=/dev/zero of=\"$1\" bs=1k count=$((3072 - used)) 2>/dev/null", state, filler]) == 0)

            func refused(_ body: () throws -> Any) {
                do {
                    _ = try body()
                    Issue.record("accepted below the state floor")
                } catch let error as HalfTunesClientError {
                    #expect(error.rpcCode == .limitExceeded, "\(error)")
                    #expect(error.description.contains("state-min-free-space (2097152)"), "\(error)")
                } catch {
                    Issue.record("\(error)")
                }
            }
            refused { try client.createTask(TaskCreateParams(session: "floor", url: origin.url("/f.bin"), destination: "new.bin")) }
            refused { try client.openSession("another") }
            refused { try client.resume(kept.id) }
            let cli = try ctl(["download", origin.url("/f.bin"), "--session", "floor"], socket: daemon.socketPath)
            #expect(cli.status != 0 && cli.stderr.contains("state-min-free-space"), "\(cli.stderr)")
            // Reads, a re-attach, a cancel and the journal go on.
            #expect(try client.task(kept.id).state == .suspended)
            #expect(try ctl(["list"], socket: daemon.socketPath).status == 0)
            _ = try client.openSession("floor")
            _ = try client.cancel(other.id)
            #expect(try client.task(other.id).state == .canceled)

            #expect(try inDaemon(["rm", filler]) == 0)
            _ = try client.resume(kept.id)
            let done = try client.waitFor(task: kept.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            _ = try client.openSession("another")
            let later = try client.startTask(origin.url("/f.bin"), session: "another")
            _ = try client.waitFor(task: later.id, state: .completed)
        }
    }

    // MARK: - Helpers

    /// Whether this process may mount a tmpfs in a private mount namespace.
    static let canMountTmpfs: Bool = {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare"),
              FileManager.default.isExecutableFile(atPath: "/usr/bin/nsenter"),
              let dir = try? TempDir() else { return false }
        defer { dir.remove() }
        let status = try? runTool("/usr/bin/unshare", ["--mount", "/bin/sh", "-c",
                                                       "mount -t tmpfs -o size=64k tmpfs \"$0\"", dir.path])
        return status == 0
    }()

    private func expectPartial(in dir: String, isPrefixOf body: [UInt8], length: Int) throws {
        let names = partialFiles(in: dir)
        #expect(names.count == 1, "\(names)")
        let name = try #require(names.first)
        let data = try #require(FileManager.default.contents(atPath: dir + "/" + name))
        #expect(data.count == length)
        #expect(Array(data) == Array(body.prefix(length)), "the kept partial data is the file's prefix")
    }

    private func stateFileSizes(_ dir: String) throws -> [String: Int] {
        var sizes: [String: Int] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: dir) {
            let attributes = try FileManager.default.attributesOfItem(atPath: dir + "/" + name)
            sizes[name] = (attributes[.size] as? NSNumber)?.intValue ?? 0
        }
        return sizes
    }
}
