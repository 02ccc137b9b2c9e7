// Disk that a server cannot take (issue 27, point 2): reservations follow the bytes received, not a server's
// claim; a stopped transfer gives back what it reserved; min-free-space keeps room for everyone.
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Disk a server cannot take", .serialized,
       .enabled(if: DiskFullTests.canMountTmpfs, "needs unshare --mount and tmpfs mounts (root)"))
struct DiskReservationTests {
    /// A server claims 20 GiB, sends 1 KiB and stalls. On a 512 MiB tmpfs the download runs (no reservation of
    /// the claim, which could not fit): free space drops by about one window (64 MiB) at most; paused, by no more
    /// than the bytes received.
    @Test func aClaimedLengthNeverSizesTheReservation() async throws {
        try await withTmpfsDaemon(size: "512m") { daemon, origin, tmpfs in
            origin.put("/claim.bin", TestOrigin.randomBytes(count: 1024, seed: 2720))
            var b = TestOrigin.Behavior()
            b.claimedLength = 20 << 30
            origin.setBehavior("/claim.bin", b)
            let before = try tmpfs.freeBytes()
            let client = try daemon.client()
            let t = try client.startDownload(origin.url("/claim.bin"), maxConnections: 1)
            try eventually("1 KiB received") { try client.task(t.id).bytesReceived >= 1024 ? true : nil }
            let running = try client.task(t.id)
            #expect(running.state == .running && running.bytesExpected == 20 << 30, "\(running.state)")
            let used = before - (try tmpfs.freeBytes())
            #expect(used <= Int64(65 * MiB), "reserved \(used) bytes for a claim of 20 GiB")
            #expect(used >= Int64(32 * MiB), "reserved only \(used) bytes: no window ahead")

            _ = try client.suspend(t.id)
            try eventually("the reservation given back") {
                before - (try tmpfs.freeBytes()) <= Int64(64 << 10) ? true : nil
            }
            #expect(try client.task(t.id).state == .suspended)
            origin.releaseStall("/claim.bin")
        }
    }

    /// min-free-space 20M on a 64 MiB tmpfs that a filler keeps at 30 MiB free: a 16 MiB download would leave
    /// 14 MiB, so it waits with diskFull and writes nothing; once the filler is gone its retry completes it.
    @Test func minFreeSpaceHoldsADownloadUntilSpaceReturns() async throws {
        try await withTmpfsDaemon(size: "64m", args: ["--min-free-space", "20M"]) { daemon, origin, tmpfs in
            let body = TestOrigin.randomBytes(count: 16 * MiB, seed: 2721)
            origin.put("/fill.bin", body)
            let filler = tmpfs.path + "/filler"
            #expect(try runTool("/usr/bin/nsenter", ["--target", String(daemon.pid), "--mount", "fallocate", "-l", "34M", tmpfs.inside + "/filler"]) == 0, "\(filler)")
            let client = try daemon.client()
            _ = try client.openSession("floor", configuration: SessionConfiguration(
                retry: RetryPolicy(initialDelay: 1, maxDelay: 1, jitter: 0)))
            let t = try client.createTask(TaskCreateParams(session: "floor", url: origin.url("/fill.bin"), start: true))
            let waiting = try client.waitFor(task: t.id, state: .waiting)
            #expect(waiting.waitingReason?.code == TaskErrorCode.diskFull, "\(String(describing: waiting.waitingReason))")
            #expect(waiting.waitingReason?.message.contains("min-free-space") == true, "\(waiting.waitingReason?.message ?? "")")
            #expect(waiting.bytesDurable == 0)
            #expect(try runTool("/usr/bin/nsenter", ["--target", String(daemon.pid), "--mount", "rm", tmpfs.inside + "/filler"]) == 0)
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: tmpfs.path + "/fill.bin") == TestOrigin.sha256Hex(body), "\(done.location ?? "")")
        }
    }

    /// The daemon's downloads directory as a tmpfs of `size` in its own mount namespace.
    struct Tmpfs {
        /// The downloads directory as the daemon sees it.
        let inside: String
        let pid: Int32
        /// The same directory as this process reaches it (through the daemon's root).
        var path: String { "/proc/\(pid)/root" + inside }

        func freeBytes() throws -> Int64 {
            var fs = statvfs()
            guard statvfs(path, &fs) == 0 else { throw TestFailure("statvfs \(path): \(errno)") }
            return Int64(fs.f_bavail) * Int64(fs.f_frsize)
        }
    }

    func withTmpfsDaemon(size: String, args: [String] = [],
                         _ body: (DaemonProcess, TestOrigin, Tmpfs) async throws -> Void) async throws {
        let origin = try await TestOrigin.start()
        let daemon = try DaemonProcess(extraArgs: args, start: false)
        let downloads = daemon.downloadsDir
        daemon.launcher = ["/usr/bin/unshare", "--mount", "/bin/sh", "-c",
                           "mount -t tmpfs -o size=\(size) tmpfs \"$0\" && exec \"$@\"", downloads]
        try await running(daemon, origin) {
            try daemon.start()
            try await body(daemon, origin, Tmpfs(inside: downloads, pid: daemon.pid))
        }
    }
}
