import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Issue 54: nothing one user sends on the socket and nothing one server sends on the wire stops the daemon for
/// everyone else. Each test is a row of the issue's tables, through the binaries: before the fix the first three
/// stopped the daemon (an overflow trap), the others got a wrong answer.
@Suite("Nothing a user or a server sends stops the daemon", .serialized)
struct AvailabilityTests {
    /// `session.open` with `destinationDirectory: "<downloads>/.\u0000"`, then `task.create` without a destination,
    /// trapped at once (the C path ended at the NUL, so every name "existed"). Control characters are refused in
    /// every path a client gives; the daemon goes on serving.
    @Test func aControlCharacterInAPathIsRefused() async throws {
        try await withDaemon { daemon, origin in
            let s = try RawSocket(path: daemon.socketPath)
            func call(_ method: String, _ params: String) throws -> [String: Any] {
                try s.send(#"{"jsonrpc":"2.0","id":1,"method":"\#(method)","params":\#(params)}"# + "\n")
                return try #require(try s.readObject())
            }
            let downloads = daemon.downloadsDir
            for bad in [#"\u0000"#, #"\n"#, #"\u001b[31m"#, #"\u007f"#, #"\u0085"#] {
                let opened = try call("session.open", #"{"identifier":"nul","configuration":{"destinationDirectory":"\#(downloads)/.\#(bad)"}}"#)
                #expect(opened.errorCode == -32602, "\(bad): \(opened)")
                #expect(opened.errorMessage?.contains("control character") == true, "\(opened)")
            }
            #expect(try call("session.open", #"{"identifier":"nul"}"#).errorCode == nil)
            origin.put("/f.bin", TestOrigin.randomBytes(count: 1000, seed: 5401))
            let created = try call("task.create", #"{"session":"nul","url":"\#(origin.url("/f.bin"))","destination":"\#(downloads)/a\u0000b"}"#)
            #expect(created.errorCode == -32602 && created.errorMessage?.contains("destination") == true, "\(created)")
            let upload = try call("task.create", #"{"session":"nul","kind":"upload","url":"\#(origin.url("/up"))","file":"/etc/hostname\u0000x"}"#)
            #expect(upload.errorCode == -32602 && upload.errorMessage?.contains("file") == true, "\(upload)")
            let long = try call("task.create", #"{"session":"nul","url":"\#(origin.url("/f.bin"))","destination":"\#(downloads)/\#(String(repeating: "d/", count: 2100))x"}"#)
            #expect(long.errorCode == -32602, "\(long)")
            #expect(daemon.isRunning)
            // Nothing was journaled, and the daemon still downloads.
            let client = try daemon.client()
            #expect(try client.tasks(session: "nul").isEmpty)
            let task = try client.startDownload(origin.url("/f.bin"), session: "nul")
            #expect(try client.waitFor(task: task.id, state: .completed).location == downloads + "/f.bin")
        }
    }

    /// `f`, `f (1)` … `f (8)`, then `f (16)`, `f (32)` … `f (2^62)` in the download directory, then a download of
    /// `…/f` with no destination: the search for a free name doubled past 2^63 and trapped. It is bounded now: past
    /// 2^24 it tries random numbers, and the download gets a free name.
    @Test func namesPlantedToRunTheSearchOnDoNotStopIt() async throws {
        try await withDaemon { daemon, origin in
            let downloads = daemon.downloadsDir
            var planted = ["f"] + (1...8).map { "f (\($0))" } + (4...62).map { "f (\(1 << $0))" }
            #expect(planted.count == 68)
            for name in planted { try Data().write(to: URL(fileURLWithPath: downloads + "/" + name)) }
            let body = TestOrigin.randomBytes(count: 100_000, seed: 5402)
            origin.put("/f", body)
            let client = try daemon.client()
            let task = try client.startDownload(origin.url("/f"))
            let done = try client.waitFor(task: task.id, state: .completed)
            let location = try #require(done.location)
            #expect(location.hasPrefix(downloads + "/f (") && !planted.contains((location as NSString).lastPathComponent),
                    "\(location)")
            // The response suggests the same name: the random one reserved at create is kept, not drawn again.
            #expect(location == task.destination, "created as \(task.destination), completed as \(location)")
            #expect(try sha256(ofFile: location) == TestOrigin.sha256Hex(body))
            planted.append((location as NSString).lastPathComponent)
            for name in planted {
                #expect(FileManager.default.fileExists(atPath: downloads + "/" + name), "\(name) is gone")
            }
            #expect(daemon.isRunning)
        }
    }

    /// A server answers the resume of a checkpointed download with `206`, the right `Content-Range`, and
    /// `Content-Length: 9223372036854775807`: `offset + length` trapped, and again at every restart (the journaled
    /// task resumed against the same server). Now the task fails as an invalid response, not transient, and a
    /// restart finds it failed.
    @Test func aLengthNear2To63OnAResumeFailsTheTaskNotTheDaemon() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 8 * MiB, seed: 5403)
            origin.put("/claim.bin", body)
            origin.setBehavior("/claim.bin", .throttled(2 * MiB))
            var client = try daemon.client()
            let task = try client.startDownload(origin.url("/claim.bin"), maxConnections: 1)
            try eventually("1 MiB durable") { try client.task(task.id).bytesDurable >= Int64(MiB) ? true : nil }
            daemon.kill9()
            var lie = TestOrigin.Behavior()
            lie.claimedLength = Int64.max
            lie.faultsFromRequest = origin.requests("/claim.bin").count // only the resume lies
            origin.setBehavior("/claim.bin", lie)
            try daemon.restart()
            client = try daemon.client()
            let failed = try client.waitFor(task: task.id, state: .failed)
            #expect(failed.error?.code == TaskErrorCode.invalidResponse, "\(String(describing: failed.error))")
            #expect(failed.error?.message.contains("9223372036854775807") == true)
            let resumed = try #require(origin.requests("/claim.bin").last)
            #expect(resumed.status == 206 && resumed.range != nil)
            #expect(daemon.isRunning)
            try daemon.terminate()
            try daemon.restart()
            client = try daemon.client()
            #expect(try client.task(task.id).state == .failed)
            #expect(daemon.isRunning)
        }
    }

    /// A server whose first line's code is cut short at its end (`HTTP/1.1 20`, `ERROR 42`): the daemon's
    /// Latin-1 head recoder read one byte past the line and trapped, before swift-nio's parser saw the head.
    @Test(arguments: ["HTTP/1.1 20\r\n\r\n", "ERROR 42\r\n\r\n"])
    func aStatusLineCutShortIsAnErrorOfTheTask(answer: String) async throws {
        let server = try RawAnswerServer(answer: Array(answer.utf8))
        defer { server.stop() }
        try await withDaemon { daemon, _ in
            let client = try daemon.client()
            let task = try client.startDownload(server.url("/short"))
            try eventually("the task to stop on the answer") {
                let t = try client.task(task.id)
                return t.state == .waiting || t.state == .failed ? t : nil
            }
            #expect(server.connections >= 1)
            #expect(daemon.isRunning)
            _ = try client.cancel(task.id)
        }
    }

    /// `{…,"method":"daemon.status",}` and `[1,]` were accepted (JSONDecoder's leniency); RFC 8259 makes a
    /// trailing comma a parse error, and the connection goes on.
    @Test func aTrailingCommaIsAParseError() async throws {
        try await withDaemon { daemon, _ in
            let s = try RawSocket(path: daemon.socketPath)
            for frame in [#"{"jsonrpc":"2.0","id":1,"method":"daemon.status",}"#, "[1,]",
                          #"{"jsonrpc":"2.0","id":2,"method":"task.list","params":{"session":"x",}}"#] {
                try s.send(frame + "\n")
                let answer = try #require(try s.readObject())
                #expect(answer.errorCode == -32700, "\(frame): \(answer)")
            }
            try s.send(#"{"jsonrpc":"2.0","id":"ok","method":"daemon.status"}"# + "\n")
            #expect(try s.readObject()?["id"] as? String == "ok")
        }
    }

    /// `printf '…\n' | nc -U -N SOCKET`: the client shuts its write side after its requests. Every request is
    /// answered (the last one without its newline too), then the daemon closes the connection; with `nc -N`
    /// itself as well.
    @Test func aClientThatShutsItsWriteSideGetsEveryAnswer() async throws {
        try await withDaemon { daemon, _ in
            let s = try RawSocket(path: daemon.socketPath)
            try s.send((1...3).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"daemon.status"}"# }.joined(separator: "\n")
                       + "\n" + #"{"jsonrpc":"2.0","id":4,"method":"session.list"}"#)
            #expect(shutdown(s.fd, Int32(SHUT_WR)) == 0)
            var ids: [Int] = []
            while let answer = try s.readObject() {
                #expect(answer["error"] == nil, "\(answer)")
                if let id = answer["id"] as? Int { ids.append(id) }
            }
            #expect(ids == [1, 2, 3, 4])

            let nc = Process()
            nc.executableURL = URL(fileURLWithPath: "/bin/sh")
            nc.arguments = ["-c", #"printf '{"jsonrpc":"2.0","id":1,"method":"daemon.status"}\n' | nc -U -N "$0""#,
                            daemon.socketPath]
            let out = Pipe()
            nc.standardOutput = out
            try nc.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            nc.waitUntilExit()
            #expect(nc.terminationStatus == 0)
            let line = try #require(String(data: data, encoding: .utf8)?.split(separator: "\n").first)
            #expect(line.contains(#""id":1"#) && line.contains(#""result""#), "\(line)")
        }
    }
}

/// Point 6: memory. What one uid's connections leave unread counts against one budget (`max-output-per-uid`), not
/// only each connection's (`max-pending-output`): two connections of one user that stop reading, each under its
/// own cap, together past the user's budget: the one whose output crossed it is disconnected, the other gets
/// every answer.
@Suite("One user's unread output", .serialized)
struct UIDOutputTests {
    @Test func twoConnectionsOfOneUserShareOneBudget() async throws {
        try await withDaemon(["--max-pending-output", "4194304", "--max-output-per-uid", "5242880"]) { daemon, _ in
            let first = try RawSocket(path: daemon.socketPath)
            let status = #"{"jsonrpc":"2.0","id":1,"method":"daemon.status"}"# + "\n"
            try first.send(status)
            let one = try #require(try first.readObject())
            let size = try JSONSerialization.data(withJSONObject: one).count + 1
            // 3.5 MiB of answers each: under one connection's 4 MiB, together over the user's 5 MiB.
            let count = (7 << 19) / size
            let requests = String(repeating: status, count: count)
            try first.send(requests)
            let second = try RawSocket(path: daemon.socketPath)
            try second.send(requests)
            // Both grow at once (the daemon answers each in turn): the one whose answer crosses the budget goes.
            let closed = try eventually("one of them is closed", timeout: 60) { () -> Int? in
                if first.peerClosed(within: 0.05) { return 0 }
                if second.peerClosed(within: 0.05) { return 1 }
                return nil
            }
            let survivor = closed == 0 ? second : first
            var answered = 0
            while answered < count, let answer = try survivor.readObject() {
                #expect(answer["result"] != nil)
                answered += 1
            }
            #expect(answered == count, "the other connection got every answer")
            #expect(daemon.isRunning)
        }
    }
}

/// Point 6: the requests all of one user's connections have read and not yet answered share one budget
/// (`max-input-per-uid`). With a budget far below what eight pipelining connections send at once, reading pauses
/// and resumes over and over: every request of every connection is still answered, in order (ReadBacklogTests
/// proves the bound itself).
@Suite("Input per uid")
struct UIDInputTests {
    @Test func connectionsOfOneUserOverItsInputBudgetGetEveryAnswer() async throws {
        try await withDaemon(["--max-input-per-uid", "4096"]) { daemon, _ in
            let count = 2000
            let connections = try (0..<8).map { _ in try RawSocket(path: daemon.socketPath) }
            for socket in connections {
                let lines = (1...count).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"daemon.status"}"# + "\n" }
                try socket.send(lines.joined())
            }
            for (n, socket) in connections.enumerated() {
                var next = 1
                while next <= count, let answer = try socket.readObject() {
                    #expect(answer["id"] as? Int == next && answer["result"] != nil, "connection \(n), answer \(next)")
                    next += 1
                }
                #expect(next == count + 1, "connection \(n) got every answer")
            }
            #expect(daemon.isRunning)
        }
    }
}

/// Point 1: numbers in journal rows. A journal edited by hand (or by a tool that knows nothing of the daemon's
/// ranges) holds times past year 9999 and infinite, queue places, counts and lengths at Int64.max, a session
/// configuration out of every range and task ids at their end: the daemon starts, shows, runs and creates as
/// before, and where no id is left, refuses in words.
@Suite("Journal rows out of range", .serialized)
struct JournalRowBoundsTests {
    @Test func aJournalEditedByHandNeitherTrapsNorStops() async throws {
        try await withDaemon { daemon, origin in
            let body = TestOrigin.randomBytes(count: 200_000, seed: 5404)
            origin.put("/f.bin", body)
            var client = try daemon.client()
            _ = try client.openSession("edited")
            let a = try client.createTask(TaskCreateParams(session: "edited", url: origin.url("/f.bin"), destination: "a.bin"))
            let b = try client.createTask(TaskCreateParams(session: "edited", url: origin.url("/f.bin"), destination: "b.bin"))
            _ = try daemon.terminate()
            let edit = """
                import sqlite3, sys
                db = sqlite3.connect(sys.argv[1])
                big = 9223372036854775807
                db.execute("UPDATE tasks SET queue_order = ?, attempts = ?, created_at = ?, updated_at = ?, next_attempt_at = ?, "
                           "bytes_expected = ?, bandwidth_limit = ?, max_connections = ? WHERE id = ?",
                           [big, big, 1e300, -1e300, float('inf'), big, big, 1000000000, int(sys.argv[2])])
                db.execute("UPDATE tasks SET queue_order = ?, resource_deadline = ?, earliest_begin_date = ? WHERE id = ?",
                           [-big - 1, 1e300, float('-inf'), int(sys.argv[3])])
                db.execute("UPDATE sessions SET acked_through = -5, created_at = 1e300, configuration = json_set(configuration, "
                           "'$.requestTimeout', 1e300, '$.maxConnectionsPerTask', 1000000000, '$.retry.initialDelay', 1e300, "
                           "'$.finishedTaskRetention', -1) WHERE identifier LIKE '%/edited'")
                db.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'tasks'", [big - 1])
                db.commit()
                """
            #expect(try runTool("/usr/bin/python3", ["-c", edit, daemon.stateDir + "/journal.sqlite", "\(a.id)", "\(b.id)"]) == 0)
            try daemon.restart()
            client = try daemon.client()
            let shownA = try client.task(a.id)
            #expect(shownA.createdAt.hasPrefix("9999-12-31T23:59:59") && shownA.attempts == Int(Int32.max), "\(shownA)")
            #expect(try client.task(b.id).state == .suspended)
            let listed = try ctl(["list", "--session", "edited"], socket: daemon.socketPath)
            #expect(listed.status == 0, "\(listed.stderr)")
            let session = try ctl(["session", "show", "edited"], socket: daemon.socketPath)
            #expect(session.status == 0, "\(session.stderr)")
            // Both run to the end (the edited one's ETA, its throttle and its connections are in range again).
            for id in [a.id, b.id] {
                _ = try client.resume(id)
                let done = try client.waitFor(task: id, state: .completed)
                #expect(try sha256(ofFile: done.location!) == TestOrigin.sha256Hex(body))
            }
            // One id is left: the next task takes it, the one after is refused in words.
            let last = try client.createTask(TaskCreateParams(session: "edited", url: origin.url("/f.bin"), destination: "c.bin"))
            #expect(last.id == Int64.max)
            do {
                _ = try client.createTask(TaskCreateParams(session: "edited", url: origin.url("/f.bin"), destination: "d.bin"))
                Issue.record("a task without an id left was created")
            } catch let error as HalfTunesClientError {
                #expect(error.description.contains("every task id"), "\(error)")
            }
            _ = try client.resume(last.id)
            _ = try client.waitFor(task: last.id, state: .completed)
            #expect(daemon.isRunning)
            #expect(try ctl(["list"], socket: daemon.socketPath).status == 0)
        }
    }
}

/// Point 7: the socket. Another user who made the directory of someone's default socket could listen there and
/// receive their URLs and credentials: the client does not connect to a socket whose directory is not the user's
/// or root's (or is writable by others); the daemon does not listen in one either.
@Suite("The control socket's directory", .serialized)
struct SocketDirectoryTests {
    @Test(.enabled(if: getuid() == 0, "needs root to give directories to other uids"))
    func aDirectoryOfAnotherUserIsNotUsed() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        chmod(dir.path, 0o755)
        func daemon(socketIn socketDir: String) throws -> (status: Int32, stderr: String) {
            let r = try runCommand(Binaries.daemon, ["--config", "/dev/null", "--socket", socketDir + "/control.sock",
                                                     "--state-dir", dir.path + "/state", "--downloads-dir", dir.path + "/dl"])
            return (r.status, r.stderr)
        }
        let theirs = dir.path + "/theirs"
        #expect(mkdir(theirs, 0o755) == 0 && chown(theirs, 4242, 4242) == 0)
        let refused = try daemon(socketIn: theirs)
        #expect(refused.status != 0 && refused.stderr.contains("belongs to uid 4242, not to root"), "\(refused)")
        #expect(!FileManager.default.fileExists(atPath: theirs + "/control.sock"))
        let open = dir.path + "/open"
        #expect(mkdir(open, 0o755) == 0 && chmod(open, 0o777) == 0)
        let writable = try daemon(socketIn: open)
        #expect(writable.status != 0 && writable.stderr.contains("writable by other users (mode 777)"), "\(writable)")

        // The client as uid 65534, whose default socket is $XDG_RUNTIME_DIR/halftunesd/control.sock; 4242 made
        // that directory and listens in it.
        let run = dir.path + "/run"
        let socketDir = run + "/halftunesd"
        #expect(mkdir(run, 0o700) == 0 && chown(run, 65534, 65534) == 0 && mkdir(socketDir, 0o755) == 0)
        let standIn = try UnixStandIn(path: socketDir + "/control.sock")
        defer { standIn.stop() }
        #expect(chown(socketDir, 4242, 4242) == 0 && chmod(socketDir + "/control.sock", 0o666) == 0)
        let env = ["XDG_RUNTIME_DIR": run, "HALFTUNES_SOCKET": ""]
        let client = try runBinary(Binaries.ctl, ["status"], environment: env, asUser: (65534, 65534))
        #expect(client.status == 77, "\(client)")
        #expect(client.stderr.contains("not connecting to \(socketDir)/control.sock: \(socketDir) belongs to uid 4242"),
                "\(client.stderr)")
        #expect(standIn.connections == 0, "the stand-in heard nothing")
        // Writable by others: the same; the user's own directory: connected (the stand-in hangs up at once).
        #expect(chown(socketDir, 65534, 65534) == 0 && chmod(socketDir, 0o777) == 0)
        let writableDir = try runBinary(Binaries.ctl, ["status"], environment: env, asUser: (65534, 65534))
        #expect(writableDir.status == 77 && writableDir.stderr.contains("writable by other users"), "\(writableDir)")
        #expect(standIn.connections == 0)
        #expect(chmod(socketDir, 0o755) == 0)
        let own = try runBinary(Binaries.ctl, ["status"], environment: env, asUser: (65534, 65534))
        #expect(own.status != 0 && !own.stderr.contains("not connecting"), "\(own)")
        // (The client may connect again when the stand-in hangs up.)
        try eventually("the client connected to its own directory's socket") { standIn.connections >= 1 ? true : nil }
        // A socket named explicitly elsewhere is used as named.
        let elsewhere = try UnixStandIn(path: theirs + "/named.sock")
        defer { elsewhere.stop() }
        #expect(chmod(theirs + "/named.sock", 0o666) == 0)
        let named = try runBinary(Binaries.ctl, ["--socket", theirs + "/named.sock", "status"], environment: env,
                                  asUser: (65534, 65534))
        #expect(!named.stderr.contains("not connecting"), "\(named)")
        try eventually("the named socket was used") { elsewhere.connections >= 1 ? true : nil }
    }

    /// A socket at the user's default path, in a directory that passes the checks (root's, sticky, as `/tmp`)
    /// but made first by another user: the client connects, sees from SO_PEERCRED whose listener it is, and
    /// says nothing to it. The user's own listener is talked to.
    @Test(.enabled(if: getuid() == 0, "needs root to listen as other uids"))
    func aListenerOfAnotherUserIsNotTalkedTo() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        chmod(dir.path, 0o755)
        let run = dir.path + "/run", socketDir = run + "/halftunesd", socketPath = socketDir + "/control.sock"
        #expect(mkdir(run, 0o755) == 0 && chown(run, 65534, 65534) == 0)
        #expect(mkdir(socketDir, 0o755) == 0 && chmod(socketDir, 0o1777) == 0)
        let env = ["XDG_RUNTIME_DIR": run, "HALFTUNES_SOCKET": ""]
        let theirs = try ForeignListener(path: socketPath, uid: 4242)
        let refused = try runBinary(Binaries.ctl, ["status"], environment: env, asUser: (65534, 65534))
        theirs.stop()
        #expect(refused.status == 77, "\(refused)")
        #expect(refused.stderr.contains("not connecting to \(socketPath): it is served by uid 4242, not by uid 65534, root"),
                "\(refused.stderr)")
        let own = try ForeignListener(path: socketPath, uid: 65534)
        defer { own.stop() }
        let talked = try runBinary(Binaries.ctl, ["status"], environment: env, asUser: (65534, 65534))
        #expect(talked.status != 77 && !talked.stderr.contains("not connecting"), "\(talked)")
    }
}

/// A listener run as another uid (python3 under setpriv): accepts connections and closes them at once.
final class ForeignListener: @unchecked Sendable {
    private let process = Process()
    private let path: String

    init(path: String, uid: UInt32) throws {
        self.path = path
        let script = """
            import os, socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o666); s.listen(16)
            print("ready", flush=True)
            while True:
                s.accept()[0].close()
            """
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        // The system python3 (the one on PATH may be under root's home, which another uid cannot run).
        process.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/python3", "-c", script, path]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let ready = out.fileHandleForReading.readData(ofLength: 6)
        guard String(decoding: ready, as: UTF8.self) == "ready\n" else { throw TestFailure("the listener did not start") }
    }

    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL) // it inherits the test runner's blocked SIGTERM
        process.waitUntilExit()
        unlink(path)
    }
}

/// A Unix socket that accepts every connection and closes it at once, counting them: someone else's listener.
final class UnixStandIn: @unchecked Sendable {
    private let fd: Int32
    private let path: String
    private let lock = NSLock()
    private var accepted = 0
    private var stopping = false

    init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard fd >= 0, bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { throw TestFailure("cannot make a socket") }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in for (i, b) in bytes.enumerated() { raw[i] = b } }
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else { throw TestFailure("cannot listen on \(path)") }
        Thread { [fd] in
            while true {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { return }
                close(client)
                let done = self.lock.withLock { () -> Bool in
                    if self.stopping { return true }
                    self.accepted += 1
                    return false
                }
                if done { return }
            }
        }.start()
    }

    var connections: Int { lock.withLock { accepted } }

    /// Wakes the accepting thread with a connection of its own, then closes the socket.
    func stop() {
        lock.withLock { stopping = true }
        if let waker = try? RawSocket(path: path) { _ = waker }
        close(fd)
        unlink(path)
    }
}

/// A TCP server on 127.0.0.1 that answers every connection with the same bytes, then closes it: a server whose
/// answer is not HTTP at all.
final class RawAnswerServer: @unchecked Sendable {
    let port: Int
    private let fd: Int32
    private let lock = NSLock()
    private var accepted = 0
    private var thread: Thread?

    init(answer: [UInt8]) throws {
        guard let (fd, port) = LoopbackSocket.bound(backlog: 16) else { throw TestFailure("cannot listen on 127.0.0.1") }
        self.fd = fd
        self.port = port
        let thread = Thread { [fd] in
            while true {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { return } // the listening socket was shut down
                self.lock.withLock { self.accepted += 1 }
                var request = [UInt8](repeating: 0, count: 65536)
                _ = request.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
                _ = answer.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(client)
            }
        }
        self.thread = thread
        thread.start()
    }

    var connections: Int { lock.withLock { accepted } }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }
}
