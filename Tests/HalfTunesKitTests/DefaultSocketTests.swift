import Foundation
import HalfTunesKit
import HalfTunesProtocol
import Testing

struct DefaultSocketTests {
    @Test func theEnvironmentOverrideWins() {
        #expect(DefaultSocket.path(socketOverride: "/x/y.sock", runtimeDirectory: "/run/user/1000", uid: 0) == "/x/y.sock")
    }

    @Test func rootUsesRun() {
        #expect(DefaultSocket.path(socketOverride: nil, runtimeDirectory: "/run/user/0", uid: 0)
            == "/run/halftunesd/control.sock")
    }

    @Test func usersUseTheirRuntimeDirectoryOrTmp() {
        #expect(DefaultSocket.path(socketOverride: "", runtimeDirectory: "/run/user/1000/", uid: 1000)
            == "/run/user/1000/halftunesd/control.sock")
        #expect(DefaultSocket.path(socketOverride: nil, runtimeDirectory: nil, uid: 1000)
            == "/tmp/halftunesd-1000/control.sock")
        #expect(DefaultSocket.path(socketOverride: nil, runtimeDirectory: "", uid: 1000)
            == "/tmp/halftunesd-1000/control.sock")
    }

    @Test func usersWithoutTheirOwnSocketFallBackToTheSystemSocket() {
        let own = "/run/user/1000/halftunesd/control.sock"
        #expect(DefaultSocket.resolve(own: own, overridden: false, exists: { $0 == DefaultSocket.systemPath }) == DefaultSocket.systemPath)
        #expect(DefaultSocket.resolve(own: own, overridden: false, exists: { _ in true }) == own)
        #expect(DefaultSocket.resolve(own: own, overridden: false, exists: { _ in false }) == own)
        #expect(DefaultSocket.resolve(own: own, overridden: true, exists: { $0 == DefaultSocket.systemPath }) == own)
    }

    /// A socket's directory is trusted when it is a directory of the user or root that no one else can write
    /// (sticky, as /tmp, is fine); a missing one has nothing to distrust.
    @Test func aSocketDirectoryIsTrustedOnlyWhenNobodyElseCouldHaveMadeIt() throws {
        let base = NSTemporaryDirectory() + "/sockdir-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        let me = getuid()
        #expect(SocketDirectory.problem(socketPath: base + "/control.sock", uid: me) == nil)
        #expect(SocketDirectory.problem(socketPath: base + "/missing/control.sock", uid: me) == nil)
        chmod(base, 0o775)
        #expect(SocketDirectory.problem(socketPath: base + "/control.sock", uid: me)?.contains("writable by other users (mode 775)") == true)
        chmod(base, 0o1777)
        #expect(SocketDirectory.problem(socketPath: base + "/control.sock", uid: me) == nil, "sticky")
        chmod(base, 0o755)
        try FileManager.default.createSymbolicLink(atPath: base + "/link", withDestinationPath: base)
        #expect(SocketDirectory.problem(socketPath: base + "/link/control.sock", uid: me)?.contains("symbolic link") == true)
        if me != 0 {
            #expect(SocketDirectory.problem(socketPath: base + "/control.sock", uid: me + 1)?.contains("belongs to uid \(me)") == true)
        } else {
            #expect(SocketDirectory.problem(socketPath: base + "/control.sock", uid: 4242) == nil, "root's is trusted")
        }
    }
}
