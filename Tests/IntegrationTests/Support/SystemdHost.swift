import Foundation

/// The repository's own files (the units in systemd/, the Makefile), found from this source file.
enum Repository {
    static var root: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path
    }
    static func path(_ relative: String) -> String { root + "/" + relative }
    static func read(_ relative: String) throws -> String {
        try String(contentsOfFile: path(relative), encoding: .utf8)
    }
}

/// A temporary directory made by mkdtemp from `template` (ending in XXXXXX); removed by `remove()` or deinit.
final class ScratchDirectory: @unchecked Sendable {
    let path: String
    init(template: String = "/tmp/htd-XXXXXX") throws {
        var bytes = Array(template.utf8CString)
        guard let p = mkdtemp(&bytes) else {
            throw TestFailure("mkdtemp \(template) failed: \(String(cString: strerror(errno)))")
        }
        path = String(cString: p)
    }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
    deinit { remove() }
}

/// The result of a command run to completion.
struct CommandResult: CustomStringConvertible {
    var command: [String]
    var status: Int32
    var stdout: String
    var stderr: String
    var output: String { stdout + stderr }
    var description: String {
        "`\(command.joined(separator: " "))` exited \(status)\n--- stdout ---\n\(stdout)--- stderr ---\n\(stderr)"
    }
}

/// Runs `executable` to completion with output captured in files (no pipe can fill up and block it);
/// kills it and throws when it runs longer than `timeout` seconds.
@discardableResult
func runCommand(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                currentDirectory: String? = nil, timeout: Double = 120) throws -> CommandResult {
    let scratch = try ScratchDirectory()
    defer { scratch.remove() }
    let outPath = scratch.path + "/stdout", errPath = scratch.path + "/stderr"
    _ = FileManager.default.createFile(atPath: outPath, contents: nil)
    _ = FileManager.default.createFile(atPath: errPath, contents: nil)
    let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
    let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
    defer { try? out.close(); try? err.close() }
    let p = Process()
    p.executableURL = URL(fileURLWithPath: executable)
    p.arguments = arguments
    if let environment { p.environment = environment }
    if let currentDirectory { p.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
    p.standardInput = FileHandle.nullDevice
    p.standardOutput = out
    p.standardError = err
    try p.run()
    let deadline = Date().addingTimeInterval(timeout)
    while p.isRunning {
        if Date() > deadline {
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
            throw TestFailure("`\(([executable] + arguments).joined(separator: " "))` did not finish within \(timeout) s")
        }
        usleep(5_000)
    }
    p.waitUntilExit()
    let text = { (path: String) in (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
    return CommandResult(command: [executable] + arguments, status: p.terminationStatus,
                         stdout: text(outPath), stderr: text(errPath))
}

/// Tools of the `systemd` and `util-linux` packages the systemd tests use, and whether this machine can
/// host a real service manager for them.
enum SystemdHost {
    static let searchPath = ["/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/lib/systemd", "/lib/systemd"]

    /// The absolute path of `name` in the usual directories, or nil.
    static func tool(_ name: String) -> String? {
        for dir in searchPath where access(dir + "/" + name, X_OK) == 0 { return dir + "/" + name }
        return nil
    }

    /// The absolute path of `name`, or a failure naming the package that provides it.
    static func requireTool(_ name: String, package: String = "systemd") throws -> String {
        guard let path = tool(name) else {
            throw TestFailure("\(name) not found in \(searchPath.joined(separator: ":")): install the Debian package \(package)")
        }
        return path
    }

    /// An environment for systemd's tools: PATH and LANG only, plus `extra`.
    static func environment(_ extra: [String: String] = [:]) -> [String: String] {
        var env = ["PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
                   "SYSTEMD_PAGER": "", "SYSTEMD_COLORS": "0"]
        for (k, v) in extra { env[k] = v }
        return env
    }

    /// The cgroup hierarchies that track processes: the unified (v2) one and/or the named v1 "systemd"
    /// one. A test manager gets its own subtree in each.
    static var trackingHierarchies: [String] {
        if FileManager.default.fileExists(atPath: "/sys/fs/cgroup/cgroup.controllers") { return ["/sys/fs/cgroup"] }
        return ["/sys/fs/cgroup/unified", "/sys/fs/cgroup/systemd"].filter {
            FileManager.default.fileExists(atPath: $0 + "/cgroup.procs")
        }
    }

    /// The user the test manager runs as (an ordinary, unprivileged user manager).
    static var managerUser: (uid: uid_t, gid: gid_t)? {
        guard let pw = getpwnam("nobody") else { return nil }
        return (pw.pointee.pw_uid, pw.pointee.pw_gid)
    }

    /// Why a real systemd user manager cannot run here, or nil when it can. Computed once.
    static let managerUnavailableReason: String? = {
        guard geteuid() == 0 else {
            return "needs root: the manager gets its own mount namespace and cgroup subtree"
        }
        if let comm = try? String(contentsOfFile: "/proc/1/comm", encoding: .utf8),
           comm.trimmingCharacters(in: .whitespacesAndNewlines) == "systemd" {
            return "PID 1 is systemd, which owns the cgroup tree; this harness is for hosts without a system manager "
                + "(containers, CI VMs); use `systemctl --user` there instead"
        }
        for name in ["systemd", "systemd-journald", "systemctl", "journalctl"] where tool(name) == nil {
            return "\(name) is missing: install the Debian package systemd"
        }
        for name in ["unshare", "nsenter", "setpriv"] where tool(name) == nil {
            return "\(name) is missing: install the Debian package util-linux"
        }
        let hierarchies = trackingHierarchies
        guard !hierarchies.isEmpty else {
            return "no cgroup hierarchy to track processes (neither cgroup2 at /sys/fs/cgroup nor name=systemd)"
        }
        for h in hierarchies where access(h, W_OK) != 0 {
            return "cgroup hierarchy \(h) is not writable (read-only /sys/fs/cgroup)"
        }
        guard let user = managerUser else { return "there is no user \"nobody\" to run the user manager as" }
        if let blocked = firstInaccessibleComponent(of: Binaries.daemon, for: user.uid) {
            return "user nobody cannot reach \(Binaries.daemon): \(blocked) is not searchable by others"
        }
        return nil
    }()

    /// Where a root manager's files go: next to the build directory, since the system unit's sandbox hides
    /// /tmp, /var/tmp (PrivateTmp=) and /home, /root (ProtectHome=) from the daemon.
    static var rootManagerBaseTemplate: String {
        URL(fileURLWithPath: Binaries.directory).deletingLastPathComponent().path + "/htd-systemd-XXXXXX"
    }

    /// Why the system unit cannot run under a root manager here (beyond `managerUnavailableReason`), or nil.
    static var systemUnitUnavailableReason: String? {
        let base = rootManagerBaseTemplate
        for hidden in ["/tmp/", "/var/tmp/", "/home/", "/root/", "/run/"] where base.hasPrefix(hidden) {
            return "the build directory \(Binaries.directory) is under \(hidden), which the system unit's sandbox hides"
        }
        return nil
    }

    /// The first directory on the way to `path` that `uid` (not root) cannot search, if any.
    static func firstInaccessibleComponent(of path: String, for uid: uid_t) -> String? {
        var current = ""
        for part in path.split(separator: "/").dropLast() {
            current += "/" + part
            var st = stat()
            guard stat(current, &st) == 0 else { return current }
            let searchable = st.st_uid == uid ? st.st_mode & S_IXUSR != 0 : st.st_mode & S_IXOTH != 0
            if !searchable { return current }
        }
        return nil
    }
}
