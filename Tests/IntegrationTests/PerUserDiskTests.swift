// Issue 27, point 2: max-disk-per-uid. Each user's partial files (unfinished downloads, kept resume data) hold at
// most their budget under the system daemon, whose files all belong to it (so disk quotas cannot do this).
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("A disk budget per user", .serialized, .enabled(if: getuid() == 0, "needs root to run clients as other uids"))
struct PerUserDiskTests {
    static let b: (uid: UInt32, gid: UInt32) = (65534, 65534)
    static let a: (uid: UInt32, gid: UInt32) = (65533, 65534)

    /// max-disk-per-uid 3M. User B's first download stalls holding 2 MiB (its reservation of the 2 MiB file);
    /// B's second writes the 1 MiB left and waits with `limitExceeded`; a third is refused at once. User A's download of the same file and root's 4 MiB
    /// one complete: their budgets are their own. B cancels the first: the second goes on and completes, exact. A
    /// file larger than the budget waits holding exactly the budget, also across kill -9 and a restart.
    @Test func aUsersDownloadsStopAtTheirBudgetAndOthersGoOn() async throws {
        try await withDaemon(["--max-disk-per-uid", "3M"]) { daemon, origin in
            chmod(daemon.dir.path, 0o711)
            chmod(daemon.socketPath, 0o666)
            chmod(daemon.downloadsDir, 0o711)
            let one = TestOrigin.randomBytes(count: 2 * MiB, seed: 2730)
            let two = TestOrigin.randomBytes(count: 2 * MiB, seed: 2731)
            let big = TestOrigin.randomBytes(count: 4 * MiB, seed: 2732)
            origin.put("/one.bin", one)
            origin.put("/two.bin", two)
            origin.put("/big.bin", big)
            var stall = TestOrigin.Behavior()
            stall.stallAfterBytes = Int64(3 * MiB / 2)
            origin.setBehavior("/one.bin", stall)
            func run(_ user: (uid: UInt32, gid: UInt32), _ args: [String]) throws -> CLIResult {
                try ctl(args, socket: daemon.socketPath, asUser: user)
            }
            func start(_ user: (uid: UInt32, gid: UInt32), _ path: String) throws -> Int64 {
                let r = try run(user, ["download", origin.url(path), "--session", "disk", "--connections", "1", "--json"])
                #expect(r.status == 0, "\(r.stderr)")
                return try JSONDecoder().decode(TaskInfo.self, from: Data(r.stdout.utf8)).id
            }
            for user in [Self.a, Self.b] {
                #expect(try run(user, ["session", "open", "disk", "--retry-initial", "1", "--retry-max", "1",
                                       "--retry-jitter", "0"]).status == 0)
            }
            let root = try daemon.client()
            let first = try start(Self.b, "/one.bin")
            _ = try eventually("B's first download stalled") { try root.task(first).bytesReceived >= 3 * MiB / 2 ? true : nil }
            let second = try start(Self.b, "/two.bin")
            let waiting = try root.waitFor(task: second, state: .waiting)
            #expect(waiting.waitingReason?.code == TaskErrorCode.limitExceeded, "\(String(describing: waiting.waitingReason))")
            #expect(waiting.waitingReason?.message.contains("max-disk-per-uid") == true)
            #expect(waiting.bytesDurable == Int64(MiB), "B's second download wrote \(waiting.bytesDurable) bytes")
            let refused = try run(Self.b, ["download", origin.url("/big.bin"), "--session", "disk"])
            #expect(refused.status != 0 && refused.stderr.contains("max-disk-per-uid"), "\(refused.stdout)\(refused.stderr)")

            // The others are not held back: A under its own budget, root without one.
            let theirs = try run(Self.a, ["download", origin.url("/two.bin"), "--session", "disk", "--wait"])
            #expect(theirs.status == 0, "\(theirs.stderr)")
            #expect(try sha256(ofFile: daemon.downloadsDir + "/65533/two.bin") == TestOrigin.sha256Hex(two))
            let rootTask = try root.startDownload(origin.url("/big.bin"))
            #expect(try root.waitFor(task: rootTask.id, state: .completed).bytesDurable == Int64(4 * MiB))

            // Cancelling the first gives its bytes back: the second goes on (retried every second) and completes.
            #expect(try run(Self.b, ["cancel", String(first)]).status == 0)
            let done = try root.waitFor(task: second, state: .completed)
            #expect(try sha256(ofFile: done.location ?? "") == TestOrigin.sha256Hex(two))

            // A file larger than the budget: B's download holds exactly the budget and waits. After kill -9 the
            // journal's bytes count at once: B is still refused; cancelled, its bytes are free again.
            let large = try start(Self.b, "/big.bin")
            let stopped = try root.waitFor(task: large, state: .waiting)
            #expect(stopped.waitingReason?.code == TaskErrorCode.limitExceeded && stopped.bytesDurable == Int64(3 * MiB),
                    "\(stopped.bytesDurable) \(String(describing: stopped.waitingReason))")
            daemon.kill9()
            try daemon.restart()
            chmod(daemon.socketPath, 0o666)
            let again = try run(Self.b, ["download", origin.url("/two.bin"), "--session", "disk"])
            #expect(again.status != 0 && again.stderr.contains("max-disk-per-uid"), "\(again.stdout)\(again.stderr)")
            #expect(try run(Self.b, ["cancel", String(large)]).status == 0)
            let after = try run(Self.b, ["download", origin.url("/two.bin"), "--session", "disk", "--wait"])
            #expect(after.status == 0, "\(after.stderr)")
            origin.releaseStall("/one.bin")
        }
    }
}
