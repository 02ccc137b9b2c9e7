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

    /// max-disk-per-uid 3M. User B's first download (2 MiB) takes 2 MiB of B's budget when it begins and stalls
    /// at 1.5 MiB; B's second (2 MiB) does not fit in what is left: it writes nothing and waits with
    /// `limitExceeded`. User A's download of the same file and root's 4 MiB one complete: their budgets are
    /// their own. B cancels the first: the second goes on and completes, exact. A file larger than the whole
    /// budget waits without writing a byte. After kill -9 and a restart with a budget below what B's partial
    /// holds, B's next download is refused at once (the journal's bytes count), and cancelling frees it.
    @Test func aUsersDownloadsStopAtTheirBudgetAndOthersGoOn() async throws {
        try await withDaemon(["--max-disk-per-uid", "3M"]) { daemon, origin in
            chmod(daemon.dir.path, 0o711)
            chmod(daemon.socketPath, 0o666)
            chmod(daemon.downloadsDir, 0o711)
            let one = TestOrigin.randomBytes(count: 2 * MiB, seed: 2730)
            let two = TestOrigin.randomBytes(count: 2 * MiB, seed: 2731)
            let big = TestOrigin.randomBytes(count: 4 * MiB, seed: 2732)
            let small = TestOrigin.randomBytes(count: 256 << 10, seed: 2733)
            origin.put("/one.bin", one)
            origin.put("/two.bin", two)
            origin.put("/big.bin", big)
            origin.put("/small.bin", small)
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
            var root = try daemon.client()
            let first = try start(Self.b, "/one.bin")
            try eventually("B's first download stalled") { try root.task(first).bytesReceived >= 3 * MiB / 2 ? true : nil }
            let second = try start(Self.b, "/two.bin")
            let waiting = try root.waitFor(task: second, state: .waiting)
            #expect(waiting.waitingReason?.code == TaskErrorCode.limitExceeded, "\(String(describing: waiting.waitingReason))")
            #expect(waiting.waitingReason?.message.contains("max-disk-per-uid") == true)
            #expect(waiting.bytesDurable == 0, "B's second download wrote \(waiting.bytesDurable) bytes")

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

            // Larger than the whole budget: it waits, writing nothing, and says so.
            let large = try start(Self.b, "/big.bin")
            let stopped = try root.waitFor(task: large, state: .waiting)
            #expect(stopped.waitingReason?.code == TaskErrorCode.limitExceeded && stopped.bytesDurable == 0,
                    "\(stopped.bytesDurable) \(String(describing: stopped.waitingReason))")
            #expect(stopped.waitingReason?.message.contains("more than max-disk-per-uid allows") == true)
            #expect(try run(Self.b, ["cancel", String(large)]).status == 0)

            // kill -9 while B's partial holds 1.5 MiB, and a restart with a budget of 1 MiB: B is refused at once.
            let held = try start(Self.b, "/one.bin")
            try eventually("1.5 MiB durable") { try root.task(held).bytesDurable >= 3 * MiB / 2 ? true : nil }
            daemon.kill9()
            daemon.extraArgs = ["--max-disk-per-uid", "1M"]
            try daemon.restart()
            chmod(daemon.socketPath, 0o666)
            root = try daemon.client()
            let refused = try run(Self.b, ["download", origin.url("/small.bin"), "--session", "disk"])
            #expect(refused.status != 0 && refused.stderr.contains("max-disk-per-uid"), "\(refused.stdout)\(refused.stderr)")
            // A data task writes no file: B's full budget does not refuse it.
            let fetched = try run(Self.b, ["fetch", origin.url("/small.bin"), "--session", "disk", "--output", "/dev/null"])
            #expect(fetched.status == 0, "\(fetched.stdout)\(fetched.stderr)")
            #expect(try run(Self.a, ["download", origin.url("/small.bin"), "--session", "disk", "--wait"]).status == 0)
            #expect(try run(Self.b, ["cancel", String(held)]).status == 0)
            let after = try run(Self.b, ["download", origin.url("/small.bin"), "--session", "disk", "--wait"])
            #expect(after.status == 0, "\(after.stderr)")
            origin.releaseStall("/one.bin")
        }
    }
}

/// Issue 54, point 6: what the journal holds for one user is bounded (`max-journal-per-uid`). uid 65534's data
/// tasks keep their bodies in the journal until their events are acknowledged; past the budget its next
/// `task.create` is refused with `limitExceeded` in words, while nothing journaled is dropped and root's work
/// goes on; acknowledging makes room again.
@Suite("The journal's budget per user", .serialized)
struct JournalBudgetTests {
    static let nobody: (uid: UInt32, gid: UInt32) = (65534, 65534)

    @Test(.enabled(if: getuid() == 0, "needs root to run the client as another uid"))
    func aUserOverTheBudgetCreatesNoMoreUntilAcknowledging() async throws {
        try await withDaemon(["--max-journal-per-uid", "100k"]) { daemon, origin in
            chmod(daemon.dir.path, 0o711)
            chmod(daemon.socketPath, 0o666)
            chmod(daemon.downloadsDir, 0o711)
            origin.put("/body.bin", TestOrigin.randomBytes(count: 40_000, seed: 5405))
            func call(_ method: String, _ params: String) throws -> CLIResult {
                try ctl(["call", method, params], socket: daemon.socketPath, asUser: Self.nobody)
            }
            func create() throws -> CLIResult {
                try call("task.create", #"{"session":"bodies","kind":"data","url":"\#(origin.url("/body.bin"))","start":true,"maxResponseBytes":60000}"#)
            }
            #expect(try call("session.open", #"{"identifier":"bodies"}"#).status == 0)
            var created = 0
            var refusal: CLIResult?
            // Each body (~53 kB as base64) stays in the journal: from the third on the user is over 100 KiB. A new
            // data task counts at once with the most its body may keep (60,000 bytes as base64), the rest when the
            // daemon reads the user's share again (at most a second later).
            for _ in 0..<40 {
                let r = try create()
                if r.status != 0 { refusal = r; break }
                created += 1
                let id = try #require(try JSONParser.parse(Array(r.stdout.utf8))["id"].flatMap { if case .int(let v) = $0 { v } else { nil } })
                try eventually("data task \(id) completed") {
                    let shown = try call("task.get", #"{"id":\#(id)}"#)
                    return shown.stdout.contains(#""state":"completed""#) ? true : nil
                }
            }
            let refused = try #require(refusal, "a create was refused")
            #expect(created >= 2, "\(created)")
            #expect(refused.stdout.contains("-32009") && refused.stdout.contains("max-journal-per-uid (102400)"), "\(refused.stdout)")
            // Root (the daemon's own user) is not limited.
            let client = try daemon.client()
            let rootTask = try client.startDownload(origin.url("/body.bin"))
            _ = try client.waitFor(task: rootTask.id, state: .completed)
            // Acknowledging the user's events takes the bodies out: room again (after the share is read anew).
            let session = try call("session.open", #"{"identifier":"bodies"}"#)
            let last = try #require(try JSONParser.parse(Array(session.stdout.utf8))["session"]?["lastEventSeq"])
            guard case .int(let through) = last else { throw TestFailure("no lastEventSeq: \(session.stdout)") }
            #expect(try call("events.ack", #"{"session":"bodies","through":\#(through)}"#).status == 0)
            try eventually("a create is taken again") { try create().status == 0 ? true : nil }
        }
    }
}
