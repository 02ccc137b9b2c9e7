import CLinuxFile
import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// Issue 27, point 3: a user (uid 65534) of a daemon running as root swaps their own download's partial file
/// for a symlink to a root-owned file, a hard link to it, or a file of their own, at each step of the partial's
/// life. Every operation of the daemon goes through the descriptor it opened, and the path is compared with it
/// before the publish: the task fails with a clear error, and the root-owned file keeps its bytes, mode, owner,
/// mtime and extended attributes.
@Suite("Partial files swapped by their user", .serialized,
       .enabled(if: getuid() == 0, "needs root to run a client as another uid"))
struct PartialSwapTests {
    static let nobody: (uid: UInt32, gid: UInt32) = (65534, 65534)

    enum Step: String, CaseIterable, CustomTestStringConvertible {
        /// The transfer is running (its writer has the file open).
        case running
        /// The task was paused (the last checkpoint written, the file closed), then resumed.
        case paused
        /// The complete file is open for its checksum (`HALFTUNES_HOLD_AT=checksum.opened`).
        case verifying
        /// The complete file is about to be published (`HALFTUNES_HOLD_AT=publish.moving`).
        case publishing
        var testDescription: String { rawValue }
    }

    enum Swap: String, CaseIterable, CustomTestStringConvertible {
        case symlink, hardlink, other
        var testDescription: String { rawValue }
    }

    @Test(arguments: Step.allCases, Swap.allCases)
    func aSwappedPartialTouchesNoOtherFile(step: Step, swap: Swap) async throws {
        let holdAt: String? = switch step {
        case .verifying: "checksum.opened"
        case .publishing: "publish.moving"
        default: nil
        }
        let release = "/tmp/htd-release-\(getpid())-\(step)-\(swap)"
        defer { unlink(release) }
        try await withDaemon(environment: holdAt.map { ["HALFTUNES_HOLD_AT": "\($0):\(release)"] } ?? [:]) { daemon, origin in
            chmod(daemon.dir.path, 0o711)
            chmod(daemon.socketPath, 0o666)
            chmod(daemon.downloadsDir, 0o711)
            let body = TestOrigin.randomBytes(count: 4 * MiB, seed: 2710)
            origin.put("/s.bin", body)
            origin.setBehavior("/s.bin", .throttled(1 * MiB))
            let victim = try Victim(path: daemon.dir.path + "/victim")
            func asNobody(_ args: [String]) throws -> CLIResult { try ctl(args, socket: daemon.socketPath, asUser: Self.nobody) }
            var args = ["download", origin.url("/s.bin"), "--session", "swap", "--json"]
            if step == .verifying { args += ["--sha256", TestOrigin.sha256Hex(body)] }
            let started = try asNobody(args)
            #expect(started.status == 0, "\(started.stderr)")
            let id = try JSONDecoder().decode(TaskInfo.self, from: Data(started.stdout.utf8)).id
            let root = try daemon.client()
            let personal = daemon.downloadsDir + "/65534"
            try eventually("some bytes durable") { try root.task(id).bytesDurable > 0 ? true : nil }
            let partial = personal + "/" + (try #require(partialFiles(in: personal).first))

            switch step {
            case .running:
                try Self.plant(swap, at: partial, victim: victim.path)
                origin.setBehavior("/s.bin", TestOrigin.Behavior())
            case .paused:
                #expect(try asNobody(["pause", String(id)]).status == 0)
                try Self.plant(swap, at: partial, victim: victim.path)
                origin.setBehavior("/s.bin", TestOrigin.Behavior())
                #expect(try asNobody(["resume", String(id)]).status == 0)
            case .verifying, .publishing:
                origin.setBehavior("/s.bin", TestOrigin.Behavior())
                try eventually("held at \(holdAt!)") { daemon.log().contains("held at \(holdAt!)") ? true : nil }
                try Self.plant(swap, at: partial, victim: victim.path)
                #expect(FileManager.default.createFile(atPath: release, contents: nil))
            }
            let ended = try eventually("the task to stop") { () -> TaskInfo? in
                let t = try root.task(id)
                return t.state == .failed || t.state == .completed || t.state == .waiting ? t : nil
            }
            #expect(ended.state == .failed, "\(ended.state): \(ended.error?.message ?? "")")
            let message = ended.error?.message ?? ""
            #expect(ended.error?.code == TaskErrorCode.ioError && message.contains("something replaced it")
                        || message.contains("replaced by"), "\(message)")
            try victim.expectUnchanged()
            // Nothing appeared under the download's name, and what the user planted is still theirs.
            #expect(!FileManager.default.fileExists(atPath: personal + "/s.bin"))
            var st = stat()
            #expect(lstat(partial, &st) == 0, "the planted file was removed")
        }
    }

    /// Moves the partial away and puts `swap` at its path (a symlink or a file of uid 65534, made as that user;
    /// a hard link made by root, since fs.protected_hardlinks keeps the user from linking root's file).
    static func plant(_ swap: Swap, at partial: String, victim: String) throws {
        let moved = partial + ".moved"
        let user = ["--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh", "-c"]
        switch swap {
        case .symlink:
            let r = try runCommand("/usr/bin/setpriv", user + ["mv '\(partial)' '\(moved)' && ln -s '\(victim)' '\(partial)'"])
            #expect(r.status == 0, "\(r.stderr)")
        case .other:
            let r = try runCommand("/usr/bin/setpriv", user + ["mv '\(partial)' '\(moved)' && printf mine > '\(partial)'"])
            #expect(r.status == 0, "\(r.stderr)")
        case .hardlink:
            #expect(rename(partial, moved) == 0 && link(victim, partial) == 0)
        }
    }
}

/// A root-owned file with known bytes, mode, owner, mtime and an extended attribute.
struct Victim {
    let path: String
    let bytes = Data("root's precious file\n".utf8)

    init(path: String) throws {
        self.path = path
        #expect(FileManager.default.createFile(atPath: path, contents: bytes))
        chmod(path, 0o640)
        let fd = open(path, O_RDWR)
        defer { close(fd) }
        let value = Array("original".utf8)
        #expect(htd_fset_xattr(fd, "user.test", value, value.count) == 0)
        var times = [timespec(tv_sec: 1_600_000_000, tv_nsec: 0), timespec(tv_sec: 1_600_000_000, tv_nsec: 0)]
        #expect(futimens(fd, &times) == 0)
    }

    func expectUnchanged(sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(FileManager.default.contents(atPath: path) == bytes, "bytes", sourceLocation: sourceLocation)
        var st = stat()
        #expect(stat(path, &st) == 0, sourceLocation: sourceLocation)
        #expect(st.st_mode & 0o7777 == 0o640 && st.st_uid == 0 && st.st_gid == 0, "mode/owner", sourceLocation: sourceLocation)
        #expect(st.st_mtim.tv_sec == 1_600_000_000, "mtime", sourceLocation: sourceLocation)
        var buffer = [UInt8](repeating: 0, count: 256)
        let n = htd_get_xattr(path, "user.test", &buffer, buffer.count)
        #expect(n == 8 && String(decoding: buffer[..<8], as: UTF8.self) == "original", "xattr", sourceLocation: sourceLocation)
        for name in ["user.xdg.origin.url", "user.xdg.referrer.url"] {
            #expect(htd_get_xattr(path, name, &buffer, buffer.count) < 0, "\(name) set", sourceLocation: sourceLocation)
        }
    }
}
