// Who asks: the uid and groups of the connection a request came on, passed explicitly to the core.
import Foundation

/// The client whose request is being handled: its uid and groups as the kernel gave them for the connection
/// (SO_PEERCRED, SO_PEERGROUPS). The router passes it explicitly to every core method that acts for a client;
/// there is no "no caller" that would mean "allowed" (the daemon's own work never goes through these checks).
struct Caller: Sendable, Equatable {
    let uid: UInt32
    /// Primary group first, then the supplementary ones.
    let groups: [gid_t]

    init(uid: UInt32, groups: [gid_t] = []) {
        self.uid = uid
        self.groups = groups
    }

    /// Whether the caller may read `path`, judged as the caller (for uploads).
    func readCheck(_ path: String) -> PeerAccess.Verdict {
        PeerAccess.check(path: path, uid: uid, groups: groups)
    }

    /// Whether the caller may see and act on something owned by `owner` (its own, or root).
    func mayAccess(owner: UInt32) -> Bool {
        uid == 0 || uid == owner
    }
}
