import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// The system service's situation: a daemon running as an unprivileged user of its own (here uid 65534)
/// serving another user (uid 65533, allowed on the socket through its group). It cannot chown, so the user's
/// personal directory is granted to them by a POSIX ACL: they can read what was downloaded for them, a third
/// user cannot.
@Suite("A shared daemon that is not root", .enabled(if: getuid() == 0, "needs root to run processes as other uids"))
struct SharedDaemonTests {
    @Test func anotherUsersDownloadsAreTheirsThroughAnACL() async throws {
        let origin = try await TestOrigin.start()
        let daemon = try DaemonProcess(start: false)
        defer { daemon.kill9(); daemon.dir.remove() }
        do {
            // The daemon's user owns its directories, as the system unit's StateDirectory= arranges.
            #expect(chown(daemon.dir.path, 65534, 65534) == 0 && chmod(daemon.dir.path, 0o711) == 0)
            #expect(chown(daemon.downloadsDir, 65534, 65534) == 0 && chmod(daemon.downloadsDir, 0o711) == 0)
            daemon.launcher = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            try daemon.start()
            var st = stat()
            #expect(lstat(daemon.socketPath, &st) == 0 && st.st_uid == 65534 && st.st_mode & 0o777 == 0o660)

            let body = TestOrigin.randomBytes(count: 150_000, seed: 90)
            origin.put("/theirs.bin", body)
            let user: (uid: UInt32, gid: UInt32) = (65533, 65534) // in the socket's group
            let done = try ctl(["download", origin.url("/theirs.bin"), "--session", "mine", "--wait"], socket: daemon.socketPath, asUser: user)
            #expect(done.status == 0, "\(done.stdout)\(done.stderr)\n\(daemon.log())")
            let personal = daemon.downloadsDir + "/65533"
            // Owned by the daemon (it cannot chown), nothing for others: only an ACL lets uid 65533 in (below).
            #expect(stat(personal, &st) == 0 && st.st_uid == 65534 && st.st_mode & 0o007 == 0,
                    "uid \(st.st_uid) mode \(String(st.st_mode & 0o777, radix: 8))")

            func digest(as uid: UInt32) throws -> CommandResult {
                try runCommand("/usr/bin/setpriv", ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/sha256sum", personal + "/theirs.bin"])
            }
            let mine = try digest(as: 65533)
            #expect(mine.status == 0 && mine.stdout.hasPrefix(TestOrigin.sha256Hex(body)), "the user cannot read their own download: \(mine)")
            #expect(try digest(as: 65532).status != 0, "a third user can read it")
            // Their own session, listed only to them.
            let listed = try ctl(["list", "--json"], socket: daemon.socketPath, asUser: user)
            #expect(listed.status == 0 && listed.stdout.contains("theirs.bin"))
            let other = try ctl(["list", "--json"], socket: daemon.socketPath, asUser: (65532, 65534))
            #expect(other.status == 0 && !other.stdout.contains("theirs.bin"))
        } catch {
            print("---- halftunesd log ----\n\(daemon.log())")
            try? await origin.shutdown()
            throw error
        }
        try await origin.shutdown()
    }
}
