import Testing
import HalfTunesKit

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
}
