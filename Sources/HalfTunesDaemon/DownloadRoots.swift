import CSystemd
import Foundation
import HalfTunesEngine
import HalfTunesProtocol

/// Where each user's downloads may go. Root may name any directory. The daemon's own user (a user-mode
/// daemon serving its owner) may use the downloads directory and their home. Everyone else (users of the
/// system service) gets `<downloads-dir>/<uid>/`, created on first use, readable only by them (owned by
/// them when the daemon runs as root, otherwise through a POSIX ACL granting them access). A directory
/// is allowed when its real path, with no symlink anywhere below the root, lies inside a root.
struct DownloadRoots: Sendable {
    let downloadsDirectory: String
    let daemonUID: UInt32

    init(downloadsDirectory: String, daemonUID: UInt32 = geteuid()) {
        self.downloadsDirectory = Destination.normalize(downloadsDirectory)
        self.daemonUID = daemonUID
    }

    /// nil: anywhere (root).
    func roots(for uid: UInt32) -> [String]? {
        if uid == 0 { return nil }
        if uid == daemonUID { return [downloadsDirectory] + (Self.home(of: uid).map { [$0] } ?? []) }
        return [personalDirectory(for: uid)]
    }

    /// A session's directory when its configuration names none.
    func defaultDirectory(for uid: UInt32) -> String {
        uid == 0 || uid == daemonUID ? downloadsDirectory : personalDirectory(for: uid)
    }

    func personalDirectory(for uid: UInt32) -> String { downloadsDirectory + "/\(uid)" }

    /// Checks that `directory` (absolute, normalized) may receive `uid`'s downloads. A path in a user's
    /// personal directory first makes sure that directory exists as theirs (whatever the first path they
    /// name in it), and with `creating` the missing directories below it are made, theirs too. Throws a
    /// clear `invalidParams` otherwise.
    func confine(_ directory: String, uid: UInt32, creating: Bool = false) throws(RPCError) {
        let personal = personalDirectory(for: uid)
        let isPersonal = uid != 0 && uid != daemonUID && PathBytes.isInside(directory, personal)
        if isPersonal { try preparePersonalDirectory(for: uid) }
        guard let roots = roots(for: uid) else { return }
        for root in roots where PathBytes.isInside(directory, root) {
            if let problem = Self.walk(from: root, to: directory) { throw RPCError.invalidParams(problem) }
            if isPersonal && creating { try createBelow(personal, to: directory, for: uid) }
            return
        }
        throw RPCError.invalidParams("\(directory) is outside your download directories (\(roots.joined(separator: ", "))); "
            + "downloads may only go there")
    }

    /// Makes the missing directories from `root` (exclusive) down to `directory`, owned by `uid` when the
    /// daemon runs as root (a system service without that right grants access by the inherited default ACL).
    private func createBelow(_ root: String, to directory: String, for uid: UInt32) throws(RPCError) {
        // The user can change what is below their directory at any moment: each directory is made relative
        // to its safely reached parent and given away without following a link (`SafePath`).
        let owner = geteuid() == 0 ? (uid: uid, gid: Self.primaryGroup(of: uid)) : nil
        var current = root
        for part in PathBytes.components(of: directory, below: root) {
            current += "/" + part
            do {
                try SafePath.makeDirectory(current, mode: 0o755, owner: owner)
            } catch {
                throw RPCError(.ioError, "Cannot create the download directory \(current): \(error)")
            }
        }
    }

    /// Creates `<downloads>/<uid>` (and the downloads directory) if missing, accessible to that uid only;
    /// one that exists with another owner or open to others (made by an older version) is repaired.
    func preparePersonalDirectory(for uid: UInt32) throws(RPCError) {
        let path = personalDirectory(for: uid)
        var st = stat()
        if lstat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFDIR else {
                throw RPCError(.ioError, "\(path) exists and is not a directory")
            }
            let asRoot = geteuid() == 0
            let wrong = asRoot ? st.st_uid != uid || st.st_mode & 0o077 != 0 : st.st_mode & 0o007 != 0
            if wrong { try restrict(path, to: uid) }
            return
        }
        do {
            try FileManager.default.createDirectory(atPath: downloadsDirectory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o711])
        } catch {
            throw RPCError(.ioError, "Cannot create the download directory \(downloadsDirectory): \(error.localizedDescription)")
        }
        guard mkdir(path, 0o700) == 0 || errno == EEXIST else {
            throw RPCError(.ioError, "Cannot create \(path): \(String(cString: strerror(errno)))")
        }
        try restrict(path, to: uid)
    }

    /// Mode 0700 and owned by `uid` (as root), or granted to `uid` by ACL (otherwise).
    private func restrict(_ path: String, to uid: UInt32) throws(RPCError) {
        guard chmod(path, 0o700) == 0 else {
            throw RPCError(.ioError, "Cannot restrict \(path) to its owner: \(String(cString: strerror(errno)))")
        }
        if geteuid() == 0 {
            guard chown(path, uid, Self.primaryGroup(of: uid)) == 0 else {
                throw RPCError(.ioError, "Cannot give \(path) to uid \(uid): \(String(cString: strerror(errno)))")
            }
        } else if let problem = PosixACL.grant(path: path, uid: uid) {
            throw RPCError(.ioError, "Cannot let uid \(uid) read \(path): \(problem)")
        }
    }

    /// The user's primary group, or a group of the same number when the uid has no passwd entry.
    static func primaryGroup(of uid: UInt32) -> gid_t {
        getpwuid(uid).map { $0.pointee.pw_gid } ?? gid_t(uid)
    }

    /// nil if every component from `root` (exclusive) down to `directory` is a real directory (no
    /// symlink, nothing missing), else why not.
    static func walk(from root: String, to directory: String) -> String? {
        var st = stat()
        guard stat(root, &st) == 0 else { return nil } // created on first use, below a trusted root
        guard (st.st_mode & S_IFMT) == S_IFDIR else { return "The download directory \(root) is not a directory" }
        var current = root
        for part in PathBytes.components(of: directory, below: root) {
            current += "/" + part
            guard lstat(current, &st) == 0 else { return nil } // the rest is created as real directories
            if (st.st_mode & S_IFMT) == S_IFLNK {
                return "\(current) is a symbolic link; downloads never go through links (name the real directory)"
            }
            guard (st.st_mode & S_IFMT) == S_IFDIR else { return "\(current) is not a directory" }
        }
        return nil
    }

    static func home(of uid: UInt32) -> String? {
        guard let pw = getpwuid(uid), let dir = pw.pointee.pw_dir else { return nil }
        let home = Destination.normalize(String(cString: dir))
        return home == "/" ? nil : home
    }
}

/// Grants one uid full access to a directory (and, by default ACL, to what is created in it) through
/// POSIX ACLs, for a daemon that cannot chown (the system service has no capabilities).
enum PosixACL {
    /// nil on success, else the error.
    static func grant(path: String, uid: UInt32) -> String? {
        // Entries sorted by tag: USER_OBJ rwx, USER(uid) rwx, GROUP_OBJ ---, MASK rwx, OTHER ---.
        let entries: [(tag: UInt16, perm: UInt16, id: UInt32)] = [
            (0x01, 7, UInt32.max), (0x02, 7, uid), (0x04, 0, UInt32.max), (0x10, 7, UInt32.max), (0x20, 0, UInt32.max),
        ]
        var blob: [UInt8] = []
        func append<T: FixedWidthInteger>(_ v: T) { withUnsafeBytes(of: v.littleEndian) { blob += $0 } }
        append(UInt32(2))
        for e in entries { append(e.tag); append(e.perm); append(e.id) }
        for name in ["system.posix_acl_access", "system.posix_acl_default"] {
            let rc = blob.withUnsafeBytes { setxattr(path, name, $0.baseAddress, $0.count, 0) }
            if rc != 0 { return "\(name): \(String(cString: strerror(errno)))" }
        }
        return nil
    }
}
