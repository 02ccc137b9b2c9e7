import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Users of a shared daemon share its queue: one user's many `high` tasks cannot keep another user's task
/// from the next free slot.
@Suite("A queue shared between users", .enabled(if: getuid() == 0, "needs root to run a client as another uid"))
struct FairQueueTests {
    @Test func anotherUsersTaskGetsTheNextSlotDespiteHighPriorities() async throws {
        try await withDaemon(["--max-concurrent", "1"]) { daemon, origin in
            chmod(daemon.dir.path, 0o711)
            chmod(daemon.socketPath, 0o666)
            chmod(daemon.downloadsDir, 0o711)
            let body = TestOrigin.randomBytes(count: 200_000, seed: 95)
            for name in ["r0", "r1", "r2", "r3", "n1"] { origin.put("/\(name).bin", body) }
            var stall = TestOrigin.Behavior()
            stall.stallAfterBytes = 1000
            origin.setBehavior("/r0.bin", stall)
            origin.setBehavior("/n1.bin", stall)
            let root = try daemon.client()
            let running = try root.startDownload(origin.url("/r0.bin"), session: "root", destination: "r0.bin")
            try eventually("root's first task to run") { try root.task(running.id).state == .running ? true : nil }
            var mine: [Int64] = []
            for name in ["r1", "r2", "r3"] {
                mine.append(try root.createTask(TaskCreateParams(session: "root", url: origin.url("/\(name).bin"),
                                                                 destination: "\(name).bin", start: true, priority: .high)).id)
            }
            let theirs = try ctl(["download", origin.url("/n1.bin"), "--session", "them", "--json"],
                                 socket: daemon.socketPath, asUser: (65534, 65534))
            #expect(theirs.status == 0, "\(theirs.stderr)")
            let theirID = try JSONDecoder().decode(TaskInfo.self, from: Data(theirs.stdout.utf8)).id
            // Root runs one transfer, the other user none: theirs is next, root's high tasks after it.
            #expect(try root.task(theirID).queuePosition == 1)
            #expect(try mine.map { try root.task($0).queuePosition } == [2, 3, 4])
            // When the slot frees, it is theirs (root was served last), and then the users take turns.
            origin.setBehavior("/n1.bin", TestOrigin.Behavior())
            _ = try root.cancel(running.id)
            _ = try root.waitFor(task: theirID, state: .completed)
            for id in mine { _ = try root.waitFor(task: id, state: .completed) }
            let started = origin.requests().map(\.path).filter { $0 != "/r0.bin" }
            #expect(started == ["/n1.bin", "/r1.bin", "/r2.bin", "/r3.bin"], "\(started)")
        }
    }
}
