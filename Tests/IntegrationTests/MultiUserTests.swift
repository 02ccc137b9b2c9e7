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

    /// Every method, sent raw as another uid: root's session and task answer exactly as things that never
    /// existed, nothing of root's changes, `daemon.status` shows root's activity only as totals, and the
    /// daemon-wide limits (shared by everyone) are refused.
    @Test func everyMethodAnswersAnotherUserAsIfNothingExisted() async throws {
        try await withDaemon { daemon, origin in
            shareSocket(daemon)
            let root = try daemon.client()
            _ = try root.openSession("root.only")
            let task = try root.createTask(TaskCreateParams(session: "root.only", url: origin.url("/never.bin"), destination: "n.bin"))
            let before = try root.session("root.only")
            func call(_ method: String, _ params: String) throws -> CLIResult {
                try ctl(["call", method, params], socket: daemon.socketPath, asUser: Self.nobody)
            }
            /// The answer for root's thing equals the answer for a thing that never existed, but for its name.
            func same(_ method: String, _ real: String, _ fake: String, _ template: String) throws {
                let a = try call(method, template.replacingOccurrences(of: "@", with: real))
                let b = try call(method, template.replacingOccurrences(of: "@", with: fake))
                #expect(a.status == ExitCode.unknown && a.stdout.contains("\"error\""), "\(method): \(a.stdout)\(a.stderr)")
                #expect(a.stdout.replacingOccurrences(of: real, with: "X") == b.stdout.replacingOccurrences(of: fake, with: "X"),
                        "\(method) tells root's \(real) from a missing one: \(a.stdout) vs \(b.stdout)")
            }
            let id = String(task.id)
            for method in ["task.get", "task.resume", "task.suspend", "task.cancel"] {
                try same(method, id, "987654", #"{"id":@}"#)
            }
            try same("task.update", id, "987654", #"{"id":@,"priority":"high"}"#)
            try same("task.move", id, "987654", #"{"id":@,"to":"front"}"#)
            try same("task.list", "root.only", "not.a.session", #"{"session":"@"}"#)
            try same("session.invalidate", "root.only", "not.a.session", #"{"identifier":"@","cancelTasks":true}"#)
            try same("events.ack", "root.only", "not.a.session", #"{"session":"@","through":1}"#)
            try same("events.subscribe", "root.only", "not.a.session", #"{"session":"@","after":0}"#)

            // daemon.status: root's task counts in the totals, nothing that names it.
            let status = try call("daemon.status", "{}")
            #expect(status.status == 0)
            let decoded = try WireCoding.decoder.decode(DaemonStatus.self, from: Data(status.stdout.utf8))
            #expect(decoded.tasks["suspended"] == 1 && decoded.sessions == 1)
            #expect(!status.stdout.contains("root.only") && !status.stdout.contains("never.bin"))

            // The daemon-wide limits are everyone's: only root (and the daemon's own user) may change them.
            let limits = try ctl(["limits", "--max-concurrent", "1", "--bandwidth", "1k"], socket: daemon.socketPath, asUser: Self.nobody)
            #expect(limits.status == 1 && limits.stderr.contains("Only root"), "\(limits.stdout)\(limits.stderr)")
            let raw = try call("daemon.setLimits", #"{"maxConnectionsPerHost":1}"#)
            #expect(raw.stdout.contains("\(RPCErrorCode.permissionDenied.rawValue)"), "\(raw.stdout)")
            #expect(try ctl(["limits"], socket: daemon.socketPath, asUser: Self.nobody).status == 0, "reading them is fine")
            let after = try root.status().limits
            #expect(after?.maxConcurrent != 1 && after?.bandwidthLimit == 0 && after?.maxConnectionsPerHost == 6)

            // Nothing of root's changed.
            let t = try root.task(task.id)
            #expect(t.state == .suspended && t.priority == .normal)
            let s = try root.session("root.only")
            #expect(s.state == .active && s.ackedThrough == before.ackedThrough && s.lastEventSeq == before.lastEventSeq)
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

    /// A user whose first session names a directory deep inside their personal directory still gets that
    /// directory as their own (0700, owned by them), and the directories below it are theirs too.
    @Test func aFirstSessionInASubdirectoryStillMakesThePersonalDirectoryTheirs() async throws {
        try await withDaemon { daemon, origin in
            shareSocket(daemon)
            chmod(daemon.downloadsDir, 0o711)
            let body = TestOrigin.randomBytes(count: 50_000, seed: 66)
            origin.put("/deep.bin", body)
            let personal = daemon.downloadsDir + "/65534"
            #expect(!FileManager.default.fileExists(atPath: personal))
            func asNobody(_ args: [String]) throws -> CLIResult { try ctl(args, socket: daemon.socketPath, asUser: Self.nobody) }
            let opened = try asNobody(["session", "open", "deep", "--directory", personal + "/a/b"])
            #expect(opened.status == 0, "\(opened.stdout)\(opened.stderr)")
            let done = try asNobody(["download", origin.url("/deep.bin"), "--session", "deep", "--wait"])
            #expect(done.status == 0, "\(done.stdout)\(done.stderr)")
            for (path, mode) in [(personal, 0o700 as mode_t), (personal + "/a", 0o755), (personal + "/a/b", 0o755)] {
                var st = stat()
                #expect(lstat(path, &st) == 0 && st.st_uid == 65534 && st.st_mode & 0o777 == mode, "\(path): uid \(st.st_uid) mode \(String(st.st_mode & 0o777, radix: 8))")
            }
            #expect(try sha256(ofFile: personal + "/a/b/deep.bin") == TestOrigin.sha256Hex(body))
            // The owner can tidy up after themselves: the download and its directories are theirs to delete.
            let removed = try runCommand("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups",
                                                              "/usr/bin/rm", "-r", personal + "/a"])
            #expect(removed.status == 0, "\(removed.stderr)")

            // A personal directory left open to others (as an older version could) is closed again on next use.
            chmod(personal, 0o755)
            #expect(try asNobody(["session", "open", "deep"]).status == 0)
            #expect(try asNobody(["download", origin.url("/deep.bin"), "--session", "deep", "--destination", personal + "/again.bin", "--wait"]).status == 0)
            var st = stat()
            #expect(stat(personal, &st) == 0 && st.st_mode & 0o777 == 0o700)
        }
    }

    /// A paused download whose partial file was replaced by a hard link to another file (which the daemon
    /// may own), or by a file of another user, fails: the daemon neither cuts nor writes that file.
    @Test func aHardLinkOrForeignFileAtThePartialPathIsNeverWritten() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 4 * MiB, seed: 67)
            origin.put("/hl.bin", body)
            let client = try daemon.client()
            for (index, plant) in ["hardlink", "foreign"].enumerated() {
                origin.setBehavior("/hl.bin", .throttled(1 * MiB))
                let task = try client.startDownload(origin.url("/hl.bin"), session: "hl", destination: "hl\(index).bin")
                try eventually("some bytes durable") { try client.task(task.id).bytesDurable > 0 ? true : nil }
                _ = try client.suspend(task.id)
                let partial = daemon.downloadsDir + "/" + (try #require(partialFiles(in: daemon.downloadsDir).first))
                let victim = daemon.dir.path + "/victim-\(plant)"
                let original = Data("precious, and longer than nothing: ".utf8 + Array(repeating: UInt8(ascii: "x"), count: 10_000))
                #expect(FileManager.default.createFile(atPath: victim, contents: original))
                #expect(unlink(partial) == 0)
                if plant == "hardlink" {
                    #expect(link(victim, partial) == 0)
                } else {
                    #expect(FileManager.default.createFile(atPath: partial, contents: original) && chown(partial, 65534, 65534) == 0)
                }
                origin.setBehavior("/hl.bin", TestOrigin.Behavior())
                _ = try client.resume(task.id)
                let ended = try client.waitFor(task: task.id, state: .failed)
                #expect(ended.error?.code == TaskErrorCode.ioError && ended.error?.message.contains("something replaced it") == true,
                        "\(String(describing: ended.error))")
                #expect(FileManager.default.contents(atPath: victim) == original, "\(plant): the victim was changed")
                #expect(!FileManager.default.fileExists(atPath: daemon.downloadsDir + "/hl\(index).bin"))
                unlink(partial)
            }
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

    /// An upload is pinned to the file its client could read when it was created: a user who points the
    /// path (here a symlink of theirs) at a file only the daemon can read before a retry gets a failed
    /// upload, and not a byte of that file leaves the machine.
    @Test func aRetriedUploadNeverFollowsASwappedPathToAnotherFile() async throws {
        try await withDaemon { daemon, origin in
            shareSocket(daemon)
            origin.acceptUploads("/swap")
            var busy = TestOrigin.Behavior()
            busy.failStatus = 503
            busy.retryAfter = "3600"
            origin.setBehavior("/swap", busy)
            let secretBody = TestOrigin.randomBytes(count: 200_000, seed: 68)
            let secret = daemon.dir.path + "/secret.key"
            #expect(FileManager.default.createFile(atPath: secret, contents: Data(secretBody), attributes: [.posixPermissions: 0o600]))
            let home = daemon.dir.path + "/nobody-home"
            try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: false)
            #expect(chown(home, 65534, 65534) == 0)
            let mine = home + "/mine.bin"
            #expect(FileManager.default.createFile(atPath: mine, contents: Data(TestOrigin.randomBytes(count: 1000, seed: 69))))
            #expect(chown(mine, 65534, 65534) == 0)
            let link = home + "/upload-me"
            #expect(symlink(mine, link) == 0)
            func asNobody(_ args: [String]) throws -> CLIResult { try ctl(args, socket: daemon.socketPath, asUser: Self.nobody) }
            let created = try asNobody(["upload", link, origin.url("/swap"), "--session", "swapper", "--json"])
            #expect(created.status == 0, "\(created.stdout)\(created.stderr)")
            let id = try JSONDecoder().decode(TaskInfo.self, from: Data(created.stdout.utf8)).id
            let root = try daemon.client()
            let waiting = try eventually("the 503 to make it wait") { () -> TaskInfo? in
                let t = try root.task(id)
                return t.state == .waiting ? t : nil
            }
            #expect(waiting.waitingReason?.httpStatus == 503)

            // The link now leads to root's secret; the retry must not send it.
            #expect(unlink(link) == 0 && symlink(secret, link) == 0)
            origin.setBehavior("/swap", TestOrigin.Behavior())
            #expect(try asNobody(["resume", String(id)]).status == 0)
            let failed = try root.waitFor(task: id, state: .failed)
            #expect(failed.error?.code == TaskErrorCode.sourceUnreadable && failed.error?.message.contains("no longer the file") == true,
                    "\(String(describing: failed.error))")
            #expect(!origin.uploads("/swap").contains { $0.sha256 == TestOrigin.sha256Hex(secretBody) })
            #expect(origin.uploads("/swap").allSatisfy { $0.bytes == 0 || $0.bytes == 1000 })

            // The same file rewritten in place (same inode) is still the user's file: a new upload of it works.
            #expect(unlink(link) == 0 && symlink(mine, link) == 0)
            let again = try asNobody(["upload", link, origin.url("/swap"), "--session", "swapper", "--wait"])
            #expect(again.status == 0, "\(again.stdout)\(again.stderr)")
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
