import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

@Suite("Downloads through the real daemon")
struct DownloadTests {
    @Test func cliDownloadWaitsAndDeliversTheExactFile() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 8 * MiB + 123, seed: 1)
            origin.put("/big.iso", body)
            let r = try ctl(["download", origin.url("/big.iso"), "--session", "com.example.app", "--wait"],
                            socket: daemon.socketPath)
            #expect(r.status == 0, "stdout: \(r.stdout) stderr: \(r.stderr)")
            let path = daemon.downloadsDir + "/big.iso"
            #expect(try sha256(ofFile: path) == TestOrigin.sha256Hex(body))
            #expect(partialFiles(in: daemon.downloadsDir).isEmpty)
            let list = try ctl(["list", "--session", "com.example.app", "--json"], socket: daemon.socketPath)
            let tasks = try JSONDecoder().decode(TaskListResult.self, from: Data(list.stdout.utf8)).tasks
            #expect(tasks.count == 1)
            #expect(tasks.first?.state == .completed)
            #expect(tasks.first?.location == path)
            #expect(tasks.first?.bytesReceived == Int64(body.count))
            #expect(tasks.first?.bytesExpected == Int64(body.count))
            let req = try #require(origin.requests("/big.iso").first)
            #expect(req.headers.contains { $0.name.lowercased() == "accept-encoding" && $0.value == "identity" })
        }
    }

    @Test func downloadWithoutWaitPrintsTheIdAndReturns() async throws {
        try await withDaemon { daemon, origin in
            origin.put("/a.m4a", TestOrigin.randomBytes(count: 100_000, seed: 2))
            let r = try ctl(["download", origin.url("/a.m4a"), "--session", "com.example.app", "--json"],
                            socket: daemon.socketPath)
            #expect(r.status == 0, "\(r.stderr)")
            let info = try JSONDecoder().decode(TaskInfo.self, from: Data(r.stdout.utf8))
            let client = try daemon.client()
            let done = try client.waitFor(task: info.id, state: .completed)
            #expect(done.location == daemon.downloadsDir + "/a.m4a")
            let show = try ctl(["show", String(info.id), "--json"], socket: daemon.socketPath)
            #expect(try JSONDecoder().decode(TaskInfo.self, from: Data(show.stdout.utf8)).state == .completed)
        }
    }

    @Test func tasksStartSuspendedUnlessStarted() async throws {
        try await withDaemon { daemon, origin in
            origin.put("/s.bin", TestOrigin.randomBytes(count: 1000, seed: 3))
            let client = try daemon.client()
            _ = try client.openSession("s")
            let t = try client.createTask(TaskCreateParams(session: "s", url: origin.url("/s.bin")))
            #expect(t.state == .suspended)
            #expect(origin.requests("/s.bin").isEmpty)
            _ = try client.resume(t.id)
            try client.waitFor(task: t.id, state: .completed)
            #expect(origin.requests("/s.bin").count == 1)
        }
    }

    @Test func existingFilesAreNeverOverwritten() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 5000, seed: 4)
            origin.put("/dup.txt", body)
            let existing = daemon.downloadsDir + "/dup.txt"
            try Data("mine".utf8).write(to: URL(fileURLWithPath: existing))
            let client = try daemon.client()
            // A default destination gets a free name...
            let t = try client.startDownload(origin.url("/dup.txt"))
            #expect(t.destination == daemon.downloadsDir + "/dup (1).txt")
            let done = try client.waitFor(task: t.id, state: .completed)
            #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            #expect(try String(contentsOfFile: existing, encoding: .utf8) == "mine")
            // ...an explicit one that exists is refused.
            #expect {
                try client.createTask(TaskCreateParams(session: "test.session", url: origin.url("/dup.txt"), destination: existing))
            } throws: { error in
                guard case HalfTunesClientError.rpc(let e) = error else { return false }
                return e.code == RPCErrorCode.destinationConflict.rawValue
            }
        }
    }

    @Test func httpErrorFailsTheTaskWithItsStatusAndWritesNothing() async throws {
        try await withDaemon { daemon, origin in
            let client = try daemon.client()
            let t = try client.startDownload(origin.url("/missing.bin"))
            let failed = try client.waitFor(task: t.id, state: .failed)
            #expect(failed.error?.httpStatus == 404)
            #expect(failed.error?.code == TaskErrorCode.httpStatus)
            #expect(!FileManager.default.fileExists(atPath: daemon.downloadsDir + "/missing.bin"))
            #expect(partialFiles(in: daemon.downloadsDir).isEmpty)
        }
    }

    @Test func queueIsFIFOUnderTheConcurrencyLimit() async throws {
        try await withDaemon(["--max-concurrent", "1"]) { daemon, origin in
            origin.put("/q1", TestOrigin.randomBytes(count: 2 * MiB, seed: 5))
            origin.put("/q2", TestOrigin.randomBytes(count: 1000, seed: 6))
            origin.put("/q3", TestOrigin.randomBytes(count: 1000, seed: 7))
            origin.setBehavior("/q1", .throttled(1 * MiB))
            let client = try daemon.client()
            let t1 = try client.startDownload(origin.url("/q1"))
            let t2 = try client.startDownload(origin.url("/q2"))
            let t3 = try client.startDownload(origin.url("/q3"))
            try client.waitFor(task: t1.id, state: .running)
            #expect(try client.task(t2.id).queuePosition == 1)
            #expect(try client.task(t3.id).queuePosition == 2)
            #expect(try client.task(t2.id).state == .queued)
            try client.waitFor(task: t3.id, state: .completed)
            let order = origin.requests().map(\.path)
            #expect(order == ["/q1", "/q2", "/q3"])
        }
    }
}
