import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// An existing file is never overwritten unless the request says so (`overwrite`, `download --overwrite`);
/// then it is replaced atomically when the download is complete, and a symlink there is replaced, not followed.
@Suite("Overwriting a destination on request")
struct OverwriteTests {
    @Test func anExistingFileIsReplacedOnlyWhenAsked() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 700_000, seed: 96)
            origin.put("/new.bin", body)
            let path = daemon.downloadsDir + "/new.bin"
            let old = Data("the old version\n".utf8)
            #expect(FileManager.default.createFile(atPath: path, contents: old))

            // Not asked: refused, the old file untouched.
            let refused = try ctl(["download", origin.url("/new.bin"), "--destination", path], socket: daemon.socketPath)
            #expect(refused.status == 1 && refused.stderr.contains("--overwrite"), "\(refused)")
            #expect(FileManager.default.contents(atPath: path) == old)
            // Without a destination the URL's name is taken: the download goes next to it.
            let beside = try ctl(["download", origin.url("/new.bin"), "--wait"], socket: daemon.socketPath)
            #expect(beside.status == 0 && beside.stdout.contains("new (1).bin"), "\(beside.stdout)")
            #expect(FileManager.default.contents(atPath: path) == old)

            // Asked: the file at the destination is the new one once complete, and the task says so.
            let replaced = try ctl(["--json", "download", origin.url("/new.bin"), "--destination", path, "--overwrite"],
                                   socket: daemon.socketPath)
            #expect(replaced.status == 0, "\(replaced.stderr)")
            let task = try WireCoding.decoder.decode(TaskInfo.self, from: Data(replaced.stdout.utf8))
            #expect(task.overwrite == true)
            let done = try daemon.client().waitFor(task: task.id, state: .completed)
            #expect(done.location == path)
            #expect(try sha256(ofFile: path) == TestOrigin.sha256Hex(body))
            #expect(partialFiles(in: daemon.downloadsDir).isEmpty)

            // --overwrite without a destination is refused: a name from the URL (or the server) never replaces a file.
            #expect(FileManager.default.createFile(atPath: path, contents: old))
            let again = try ctl(["download", origin.url("/new.bin"), "--overwrite", "--wait"], socket: daemon.socketPath)
            #expect(again.status == 2 && again.stderr.contains("overwrite needs an explicit destination"), "\(again)")
            #expect(FileManager.default.contents(atPath: path) == old)

            // A symlink at the destination is replaced by the file; what it pointed to is not touched.
            let victim = daemon.dir.path + "/victim"
            #expect(FileManager.default.createFile(atPath: victim, contents: old))
            let link = daemon.downloadsDir + "/linked.bin"
            #expect(symlink(victim, link) == 0)
            let viaLink = try ctl(["download", origin.url("/new.bin"), "--destination", link, "--overwrite", "--wait"],
                                  socket: daemon.socketPath)
            #expect(viaLink.status == 0, "\(viaLink.stderr)")
            var st = stat()
            #expect(lstat(link, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG)
            #expect(try sha256(ofFile: link) == TestOrigin.sha256Hex(body))
            #expect(FileManager.default.contents(atPath: victim) == old)

            // Only downloads have a destination to overwrite.
            let upload = try ctl(["call", "task.create", #"{"session":"x","kind":"data","url":"\#(origin.url("/new.bin"))","overwrite":true}"#],
                                 socket: daemon.socketPath)
            #expect(upload.status != 0)
        }
    }

    /// A crash between journaling the publish and replacing the file is finished on restart: the old file
    /// is replaced once, with the complete download.
    @Test func aCrashWhileReplacingIsFinishedOnRestart() async throws {
        let origin = try await TestOrigin.start()
        let daemon = try DaemonProcess(start: false)
        defer { daemon.kill9(); daemon.dir.remove() }
        daemon.environment = ["HALFTUNES_CRASH_AT": "publish.afterIntent"]
        try daemon.start()
        let body = TestOrigin.randomBytes(count: 2 * MiB + 3, seed: 97)
        origin.put("/crash.bin", body)
        let path = daemon.downloadsDir + "/crash.bin"
        #expect(FileManager.default.createFile(atPath: path, contents: Data("old".utf8)))
        var client = try daemon.client()
        _ = try client.openSession("test.session")
        let t = try client.createTask(TaskCreateParams(session: "test.session", url: origin.url("/crash.bin"), destination: path,
                                                       start: true, overwrite: true))
        try eventually("the daemon to crash while publishing") { daemon.isRunning ? nil : true }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "old")
        daemon.environment = [:]
        try daemon.restart()
        client = try daemon.client()
        let done = try client.waitFor(task: t.id, state: .completed)
        #expect(done.location == path)
        #expect(try sha256(ofFile: path) == TestOrigin.sha256Hex(body))
        #expect(partialFiles(in: daemon.downloadsDir).isEmpty)
        #expect(origin.requests("/crash.bin").count == 1)
        try await origin.shutdown()
    }
}
