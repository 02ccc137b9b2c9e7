import Foundation
import HalfTunesCore
import HalfTunesEngine
import Testing
@testable import HalfTunesDaemon

@Suite("Peer groups and read checks")
struct PeerAccessTests {
    /// The groups come from the peer process, but only while that pid is still a process of the peer's uid.
    @Test func groupsAreReadOnlyFromAProcessOfThePeersUID() {
        let me = getpid(), uid = geteuid(), gid = getegid()
        var supplementary = [gid_t](repeating: 0, count: 256)
        let n = getgroups(Int32(supplementary.count), &supplementary)
        let mine = PeerAccess.groups(pid: me, uid: uid, primary: gid)
        #expect(mine.first == gid)
        #expect(Set(mine) == Set([gid] + supplementary.prefix(Int(max(n, 0)))))
        // The same pid claimed for another uid (a reused pid): only the primary group is trusted.
        #expect(PeerAccess.groups(pid: me, uid: uid &+ 4242, primary: 77) == [77])
        #expect(PeerAccess.groups(pid: 0, uid: uid, primary: 5) == [5])
        #expect(PeerAccess.groups(pid: Int32.max, uid: uid, primary: 6) == [6])
    }

    /// SO_PEERGROUPS fills a zeroed buffer with the sorted supplementary groups: trailing zeros are padding,
    /// a leading 0 followed by groups is the root group, and zeros only count as no group (never too much).
    @Test func peerGroupsBufferIsReadWithoutItsLength() {
        #expect(PeerAccess.groups(peerGroups: [0, 0, 0, 0], primary: 100) == [100])
        #expect(PeerAccess.groups(peerGroups: [], primary: 100) == [100])
        #expect(PeerAccess.groups(peerGroups: [5, 27, 0, 0], primary: 100) == [100, 5, 27])
        #expect(PeerAccess.groups(peerGroups: [0, 5, 27, 0], primary: 100) == [100, 0, 5, 27])
        #expect(PeerAccess.groups(peerGroups: [4, 5, 6], primary: 4) == [4, 4, 5, 6])
    }

    /// A file is judged by its real path with the caller's uid; an allowed verdict names the very file judged.
    @Test func readChecksJudgeTheFileAsTheCallerAndNameIt() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("peer-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/f"
        #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8), attributes: [.posixPermissions: 0o600]))
        // The owner: the daemon's own uid, or (as root) a user the file is given to.
        let owner: uid_t = geteuid() == 0 ? 65534 : geteuid()
        if geteuid() == 0 { #expect(chown(file, owner, 65534) == 0) }
        var st = stat()
        #expect(stat(file, &st) == 0)
        #expect(PeerAccess.check(path: file, uid: owner, groups: []) == .allowed(checked: FileID(st)))
        guard case .refused(let why) = PeerAccess.check(path: file, uid: owner &+ 1, groups: []) else {
            Issue.record("another uid may read a 0600 file")
            return
        }
        #expect(why.contains("may not read"))
        #expect(PeerAccess.check(path: file, uid: 0, groups: []) == .allowed(checked: nil))
    }

    /// Access is judged for the caller the router passes, which always names a uid: only root sees other
    /// users' things, and an upload's file is judged with the caller's uid and groups, never the daemon's.
    @Test func theExplicitCallerDecidesAccess() throws {
        #expect(Caller(uid: 1000).mayAccess(owner: 1000) && !Caller(uid: 1000).mayAccess(owner: 1001))
        #expect(Caller(uid: 0).mayAccess(owner: 1001) && !Caller(uid: 1001).mayAccess(owner: 0))
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("caller-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/f"
        #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8), attributes: [.posixPermissions: 0o640]))
        let owner: uid_t = geteuid() == 0 ? 65534 : geteuid()
        if geteuid() == 0 { #expect(chown(file, owner, 4242) == 0) }
        var st = stat()
        #expect(stat(file, &st) == 0)
        let stranger = Caller(uid: owner &+ 1, groups: [owner &+ 1])
        guard case .refused = stranger.readCheck(file) else {
            Issue.record("a caller of another uid and group may read a 0640 file")
            return
        }
        // The file's group, as a supplementary group of the caller, lets it read.
        let member = Caller(uid: owner &+ 1, groups: [owner &+ 1, st.st_gid])
        #expect(member.readCheck(file) == .allowed(checked: FileID(st)))
    }
}
