import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// A user who swaps a directory on the way to their download for a link of their own, after the task was
/// accepted, cannot make the daemon (root here) write, publish or delete anywhere else.
@Suite("Swapped directories", .enabled(if: getuid() == 0, "needs root to run a client as another uid"))
struct PathSwapTests {
    @Test func aDirectorySwappedForAUsersLinkIsNeverWrittenThrough() async throws {
        try await withDaemon { daemon, origin in
            chmod(daemon.dir.path, 0o711)
            chmod(daemon.socketPath, 0o666)
            chmod(daemon.downloadsDir, 0o711)
            let body = TestOrigin.randomBytes(count: 4 * MiB, seed: 70)
            origin.put("/swap.bin", body)
            origin.setBehavior("/swap.bin", .throttled(1 * MiB))
            let nobody: (uid: UInt32, gid: UInt32) = (65534, 65534)
            func asNobody(_ args: [String]) throws -> CLIResult { try ctl(args, socket: daemon.socketPath, asUser: nobody) }
            let personal = daemon.downloadsDir + "/65534"
            #expect(try asNobody(["session", "open", "swap", "--directory", personal + "/in"]).status == 0)
            let started = try asNobody(["download", origin.url("/swap.bin"), "--session", "swap", "--json"])
            #expect(started.status == 0, "\(started.stderr)")
            let id = try JSONDecoder().decode(TaskInfo.self, from: Data(started.stdout.utf8)).id
            let root = try daemon.client()
            try eventually("some bytes durable") { try root.task(id).bytesDurable > 0 ? true : nil }
            #expect(try asNobody(["pause", String(id)]).status == 0)

            // The user moves their directory away and puts a link of theirs to root's directory in its place.
            let target = daemon.dir.path + "/root-only"
            try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: false)
            let swap = try runCommand("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh", "-c",
                                                           "mv \(personal)/in \(personal)/moved && ln -s \(target) \(personal)/in"])
            #expect(swap.status == 0, "\(swap.stderr)")
            origin.setBehavior("/swap.bin", TestOrigin.Behavior())
            #expect(try asNobody(["resume", String(id)]).status == 0)
            let failed = try root.waitFor(task: id, state: .failed)
            #expect(failed.error?.code == TaskErrorCode.ioError && failed.error?.message.contains("symbolic link of uid 65534") == true,
                    "\(String(describing: failed.error))")
            #expect(try FileManager.default.contentsOfDirectory(atPath: target).isEmpty, "written through the link")
            // What was downloaded stays where it was written, in the user's own (moved) directory.
            #expect(try FileManager.default.contentsOfDirectory(atPath: personal + "/moved").allSatisfy { $0.hasSuffix(".partial") })
        }
    }

    /// Root's own links on the way (root trusts itself) are followed as before.
    @Test func rootsOwnLinksAreFollowed() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 100_000, seed: 71)
            origin.put("/l.bin", body)
            let real = daemon.dir.path + "/real"
            try FileManager.default.createDirectory(atPath: real, withIntermediateDirectories: false)
            #expect(symlink(real, daemon.dir.path + "/via") == 0)
            let done = try ctl(["download", origin.url("/l.bin"), "--destination", daemon.dir.path + "/via/l.bin", "--wait"],
                               socket: daemon.socketPath)
            #expect(done.status == 0, "\(done.stdout)\(done.stderr)")
            #expect(try sha256(ofFile: real + "/l.bin") == TestOrigin.sha256Hex(body))
        }
    }
}
