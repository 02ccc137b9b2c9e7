import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Two users share one daemon: a client running as uid 65534 (through setpriv) against root's daemon.
@Suite("Users are isolated from each other", .enabled(if: getuid() == 0, "needs root to run a client as another uid"))
struct MultiUserTests {
    static let nobody: (uid: UInt32, gid: UInt32) = (65534, 65534)

    /// Opens the test daemon's socket to everyone (its temporary directory is root's, mode 0700).
    func shareSocket(_ daemon: DaemonProcess) {
        chmod(daemon.dir.path, 0o711)
        chmod(daemon.socketPath, 0o666)
    }

    @Test func anotherUserCannotSeeOrTouchWhatIsNotTheirs() async throws {
        try await withDaemon { daemon, origin in
            shareSocket(daemon)
            let body = TestOrigin.randomBytes(count: 200_000, seed: 61)
            origin.put("/mine.bin", body)
            let root = try daemon.client()
            _ = try root.openSession("same.name")
            let rootTask = try root.createTask(TaskCreateParams(session: "same.name", url: origin.url("/mine.bin"), destination: "root.bin"))
            func asNobody(_ args: [String]) throws -> CLIResult { try ctl(args, socket: daemon.socketPath, asUser: Self.nobody) }

            // Root's task and session do not exist for nobody: the same answers as for things that never existed.
            let missing = try asNobody(["show", "999999"])
            let foreign = try asNobody(["show", String(rootTask.id)])
            #expect(foreign.status == ExitCode.unknown && missing.status == ExitCode.unknown)
            #expect(foreign.stderr.replacingOccurrences(of: String(rootTask.id), with: "N")
                == missing.stderr.replacingOccurrences(of: "999999", with: "N"))
            for verb in ["pause", "resume", "cancel"] {
                #expect(try asNobody([verb, String(rootTask.id)]).status == ExitCode.unknown, "\(verb)")
            }
            #expect(try asNobody(["list", "--session", "same.name"]).status == ExitCode.unknown)
            #expect(try asNobody(["subscribe", "--session", "same.name", "--after", "0"]).status == ExitCode.unknown)
            let sessions = try asNobody(["sessions", "--json"])
            #expect(sessions.status == 0 && !sessions.stdout.contains("same.name"), "\(sessions.stdout)")
            let all = try asNobody(["list", "--json"])
            #expect(all.status == 0 && !all.stdout.contains("mine.bin"), "\(all.stdout)")
            // Only root may name another user's session by its qualified form.
            #expect(try asNobody(["list", "--session", "0/same.name"]).status == ExitCode.usage)
            #expect(try root.task(rootTask.id).state == .suspended)

            // Nobody's own session of the same name is another session, and works.
            let download = try asNobody(["download", origin.url("/mine.bin"), "--session", "same.name", "--wait"])
            #expect(download.status == 0, "\(download.stdout)\(download.stderr)")
            let theirs = try asNobody(["list", "--session", "same.name", "--json"])
            let listed = try WireCoding.decoder.decode(TaskListResult.self, from: Data(theirs.stdout.utf8)).tasks
            #expect(listed.count == 1 && listed.first?.session == "same.name" && listed.first?.state == .completed)
            let theirTask = try #require(listed.first)
            #expect(try sha256(ofFile: theirTask.location ?? "") == TestOrigin.sha256Hex(body))
            #expect(try root.tasks(session: "same.name").map(\.id) == [rootTask.id])

            // Root sees everyone's sessions, others' by their qualified name, and can act on their tasks.
            #expect(Set(try root.sessions().map(\.identifier)) == ["same.name", "65534/same.name"])
            #expect(try root.task(theirTask.id).session == "65534/same.name")
            #expect(try root.tasks(session: "65534/same.name").map(\.id) == [theirTask.id])
        }
    }

    /// Another user's downloads go to `<downloads>/<uid>/`, owned by them; every way out of it is refused
    /// and writes nothing.
    @Test func downloadsStayInsideTheUsersOwnDirectory() async throws {
        try await withDaemon { daemon, origin in
            shareSocket(daemon)
            chmod(daemon.downloadsDir, 0o711)
            let body = TestOrigin.randomBytes(count: 100_000, seed: 63)
            origin.put("/f.bin", body)
            func asNobody(_ args: [String]) throws -> CLIResult { try ctl(args, socket: daemon.socketPath, asUser: Self.nobody) }
            let done = try asNobody(["download", origin.url("/f.bin"), "--session", "mine", "--wait"])
            #expect(done.status == 0, "\(done.stderr)")
            let personal = daemon.downloadsDir + "/65534"
            var st = stat()
            #expect(stat(personal, &st) == 0 && st.st_uid == 65534 && st.st_mode & 0o777 == 0o700)
            #expect(try sha256(ofFile: personal + "/f.bin") == TestOrigin.sha256Hex(body))
            let read = try runCommand("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/cat", personal + "/f.bin"])
            #expect(read.status == 0, "uid 65534 cannot read its own download")

            // Ways out: traversal, absolute paths elsewhere, a symlinked directory, another session directory.
            let elsewhere = daemon.dir.path + "/elsewhere"
            try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: false)
            #expect(symlink(elsewhere, personal + "/link") == 0)
            for destination in [personal + "/../0/x.bin", personal + "/../../state/x.bin", daemon.downloadsDir + "/x.bin",
                                "/tmp/x.bin", personal + "/link/x.bin"] {
                let r = try asNobody(["download", origin.url("/f.bin"), "--session", "mine", "--destination", destination])
                #expect(r.status == 2, "destination \(destination) was not refused: \(r.stdout)\(r.stderr)")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty)
            #expect(!FileManager.default.fileExists(atPath: daemon.downloadsDir + "/x.bin"))
            #expect(!FileManager.default.fileExists(atPath: "/tmp/x.bin"))
            // A symlink planted at the destination is never followed or replaced.
            #expect(symlink("/etc/hostname", personal + "/planted.bin") == 0)
            let planted = try asNobody(["download", origin.url("/f.bin"), "--session", "mine", "--destination", personal + "/planted.bin"])
            #expect(planted.status != 0)
            #expect(try String(contentsOfFile: "/etc/hostname", encoding: .utf8).utf8.count < 1000)
        }
    }

    /// A user who swaps their paused download's partial file for a symlink gets a failed task; the
    /// daemon never writes through the link. Another user's resume data is refused.
    @Test func partialSymlinksAndForeignResumeDataAreRefused() async throws {
        try await withDaemon { daemon, origin in
            shareSocket(daemon)
            chmod(daemon.downloadsDir, 0o711)
            let body = TestOrigin.randomBytes(count: 4 * MiB, seed: 65)
            origin.put("/slow.bin", body)
            origin.setBehavior("/slow.bin", .throttled(1 * MiB))
            func asNobody(_ args: [String]) throws -> CLIResult { try ctl(args, socket: daemon.socketPath, asUser: Self.nobody) }
            let started = try asNobody(["download", origin.url("/slow.bin"), "--session", "swap", "--json"])
            #expect(started.status == 0, "\(started.stderr)")
            let id = try JSONDecoder().decode(TaskInfo.self, from: Data(started.stdout.utf8)).id
            let root = try daemon.client()
            try eventually("some bytes durable") { try root.task(id).bytesDurable > 0 ? true : nil }
            #expect(try asNobody(["pause", String(id)]).status == 0)
            let personal = daemon.downloadsDir + "/65534"
            let partial = personal + "/" + (try #require(partialFiles(in: personal).first))
            let victim = daemon.dir.path + "/victim"
            #expect(FileManager.default.createFile(atPath: victim, contents: Data("untouched".utf8)))
            #expect(unlink(partial) == 0 && symlink(victim, partial) == 0)
            #expect(try asNobody(["resume", String(id)]).status == 0)
            let ended = try eventually("the task to stop") { () -> TaskInfo? in
                let t = try root.task(id)
                return t.state == .failed || t.state == .waiting ? t : nil
            }
            #expect(ended.state != .completed)
            #expect(try String(contentsOfFile: victim, encoding: .utf8) == "untouched")

            // Root's resume data, leaked to another user, is refused in their session.
            origin.setBehavior("/slow.bin", .throttled(1 * MiB))
            let mine = try root.startDownload(origin.url("/slow.bin"), session: "rootdata", destination: "rd.bin")
            try eventually("root's bytes durable") { try root.task(mine.id).bytesDurable > 0 ? true : nil }
            let data = try #require(try root.cancel(mine.id, produceResumeData: true).resumeData)
            let stolen = try asNobody(["download", "--session", "swap", "--resume-data", data])
            #expect(stolen.status != 0 && stolen.stderr.contains("Resume data"), "\(stolen.stdout)\(stolen.stderr)")
            // Still good for its owner.
            let back = try root.createTask(TaskCreateParams(session: "rootdata", resumeData: data, start: true))
            origin.setBehavior("/slow.bin", TestOrigin.Behavior())
            #expect(try root.waitFor(task: back.id, state: .completed).bytesReceived == Int64(body.count))
        }
    }

    /// The daemon (root here) never uploads a file its client could not read itself; a file the client
    /// can read goes out intact.
    @Test func uploadsSendOnlyFilesTheClientCanRead() async throws {
        try await withDaemon { daemon, origin in
            shareSocket(daemon)
            origin.acceptUploads("/up")
            let secret = daemon.dir.path + "/secret.bin"          // inside root's 0711 directory, mode 0600
            let open = daemon.dir.path + "/public/open.bin"       // world-readable, in a world-searchable directory
            try FileManager.default.createDirectory(atPath: daemon.dir.path + "/public", withIntermediateDirectories: false,
                                                    attributes: [.posixPermissions: 0o755])
            let body = TestOrigin.randomBytes(count: 300_000, seed: 64)
            #expect(FileManager.default.createFile(atPath: secret, contents: Data(body), attributes: [.posixPermissions: 0o600]))
            #expect(FileManager.default.createFile(atPath: open, contents: Data(body), attributes: [.posixPermissions: 0o644]))
            func asNobody(_ args: [String]) throws -> CLIResult { try ctl(args, socket: daemon.socketPath, asUser: Self.nobody) }
            let refused = try asNobody(["upload", secret, origin.url("/up"), "--session", "up"])
            #expect(refused.status == 2 && refused.stderr.contains("may not read"), "\(refused.stdout)\(refused.stderr)")
            #expect(origin.uploads("/up").isEmpty)
            let sent = try asNobody(["upload", open, origin.url("/up"), "--session", "up", "--wait"])
            #expect(sent.status == 0, "\(sent.stdout)\(sent.stderr)")
            #expect(origin.uploads("/up").last?.sha256 == TestOrigin.sha256Hex(body))
            // Root's own client may upload the secret file.
            let root = try ctl(["upload", secret, origin.url("/up"), "--session", "up", "--wait"], socket: daemon.socketPath)
            #expect(root.status == 0, "\(root.stderr)")
        }
    }

    /// A socket the daemon binds itself gets the configured group, mode 0660; an unknown group is refused.
    @Test func theSocketGetsTheConfiguredGroup() async throws {
        try await withDaemon(["--socket-group", "65534"]) { daemon, origin in
            var st = stat()
            #expect(lstat(daemon.socketPath, &st) == 0)
            #expect(st.st_gid == 65534 && st.st_mode & 0o777 == 0o660)
        }
        let refused = try runCommand(Binaries.daemon, ["--socket-group", "no-such-group-here", "--config", "/dev/null"])
        #expect(refused.status != 0 && refused.stderr.contains("socket-group"), "\(refused)")
    }

    /// Nobody's events never reach root's subscriber of the same-named session, and the reverse.
    @Test func eventsStayWithTheirOwner() async throws {
        try await withDaemon { daemon, origin in
            shareSocket(daemon)
            origin.put("/e.bin", TestOrigin.randomBytes(count: 1000, seed: 62))
            let root = try daemon.client()
            _ = try root.openSession("events.same")
            let recorder = try EventRecorder(client: root, session: "events.same", after: 0)
            _ = try recorder.wait(for: "replay done") { $0.isDidFinishEvents }
            let theirs = try ctl(["download", origin.url("/e.bin"), "--session", "events.same", "--wait"],
                                 socket: daemon.socketPath, asUser: Self.nobody)
            #expect(theirs.status == 0, "\(theirs.stderr)")
            let mine = try root.createTask(TaskCreateParams(session: "events.same", url: origin.url("/e.bin"), destination: "e-root.bin", start: true))
            _ = try recorder.wait(for: "root's completion") { $0.task == mine.id && $0.completionError != nil }
            #expect(recorder.all.allSatisfy { $0.task == nil || $0.task == mine.id })
            #expect(recorder.all.allSatisfy { $0.session == "events.same" })
        }
    }
}

private enum ExitCode {
    static let usage: Int32 = 2
    static let unknown: Int32 = 3
}
