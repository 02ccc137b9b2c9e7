import Foundation
import HalfTunesCore
import HalfTunesEngine

/// Whether a client may read a file, judged with its own uid and groups, so the daemon (which may run
/// with more rights) never uploads a file its client could not read. Mode bits only: an ACL that would
/// grant more access is not consulted, so the check errs on the side of refusing.
enum PeerAccess {
    /// The peer's groups from what SO_PEERGROUPS wrote into a zero-filled buffer: the supplementary groups
    /// of the connecting process as the kernel holds them (sorted ascending), then zeros. Trailing zeros are
    /// padding; a 0 before other groups is the root group, a member. The one ambiguous case, a buffer of
    /// zeros only (no supplementary groups, or the root group alone), counts as none: it errs on refusing.
    static func groups(peerGroups raw: [gid_t], primary: gid_t) -> [gid_t] {
        guard let last = raw.lastIndex(where: { $0 != 0 }) else { return [primary] }
        return [primary] + raw[...last]
    }

    /// The peer's groups (primary and supplementary) from /proc/<pid>/status at connect time, when
    /// SO_PEERGROUPS is not available (Linux before 4.13, or more groups than its buffer holds). Just the
    /// primary group if the process is gone or hidden (ProtectProc=invisible hides other users' processes from
    /// the system unit), or if that pid is now a process of another uid (reused).
    static func groups(pid: Int32, uid: uid_t, primary: gid_t) -> [gid_t] {
        guard pid > 0, let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return [primary] }
        let lines = status.split(separator: "\n")
        // "Uid:\t<real>\t<effective>\t<saved>\t<fs>": SO_PEERCRED reports the effective uid at connect.
        guard let uids = lines.first(where: { $0.hasPrefix("Uid:") })?.dropFirst("Uid:".count)
                .split(whereSeparator: { $0 == " " || $0 == "\t" }),
              uids.count >= 2, uid_t(uids[1]) == uid,
              let line = lines.first(where: { $0.hasPrefix("Groups:") })
        else { return [primary] }
        return [primary] + line.dropFirst("Groups:".count).split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { gid_t($0) }
    }

    enum Verdict: Equatable {
        /// The caller may read it; `checked` is the file that was judged (nil for root: nothing judged).
        case allowed(checked: FileID?)
        case refused(String)
    }

    /// Whether `uid` (with `groups`) may read `path`: search permission on every directory of its real
    /// path and read permission on the file; when refused, a sentence saying why not.
    static func check(path: String, uid: uid_t, groups: [gid_t]) -> Verdict {
        if uid == 0 { return .allowed(checked: nil) }
        guard let resolved = realpath(path, nil) else {
            return .refused("\(path) cannot be opened: \(String(cString: strerror(errno)))")
        }
        let real = String(cString: resolved)
        free(resolved)
        func allowed(_ st: stat, _ owner: mode_t, _ group: mode_t, _ other: mode_t) -> Bool {
            if st.st_uid == uid { return st.st_mode & owner != 0 }
            if groups.contains(st.st_gid) { return st.st_mode & group != 0 }
            return st.st_mode & other != 0
        }
        var st = stat()
        var directory = ""
        for part in real.split(separator: "/").dropLast() {
            directory += "/" + part
            guard stat(directory, &st) == 0 else { return .refused("\(directory) cannot be read: \(String(cString: strerror(errno)))") }
            if !allowed(st, S_IXUSR, S_IXGRP, S_IXOTH) { return .refused("you (uid \(uid)) may not enter \(directory)") }
        }
        if directory.isEmpty { directory = "/" }
        guard stat(real, &st) == 0 else { return .refused("\(real) cannot be read: \(String(cString: strerror(errno)))") }
        if !allowed(st, S_IRUSR, S_IRGRP, S_IROTH) { return .refused("you (uid \(uid)) may not read \(real)") }
        return .allowed(checked: FileID(st))
    }
}
