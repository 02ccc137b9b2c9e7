import Foundation

/// A real systemd manager (`systemd --user`) with its own journald, for tests on a host whose PID 1 is not
/// systemd.
///
/// Root sets the stage: `unshare --mount` gives a private mount namespace with a tmpfs on /run (holding
/// /run/systemd/system, so systemctl sees a booted systemd, and the "inaccessible" nodes sandboxing
/// mounts use); systemd-journald runs as root in that namespace, so journalctl and the services' stdout
/// and journal sockets find it at the usual paths; the manager runs in its own cgroup subtree, so it never
/// touches other processes' cgroups. It shares the network namespace: 127.0.0.1 works.
/// - `.user`: the manager runs as user nobody, an ordinary unprivileged user manager (for systemd/user/).
/// - `.root`: the manager stays root, so the system unit's sandboxing (mount namespaces, User=) works;
///   its base directory is next to the binaries, because PrivateTmp=/ProtectHome= hide /tmp and /home.
/// `stop()` ends everything it started (also on failure, and from deinit as a last resort).
final class SystemdUserManager: @unchecked Sendable {
    enum Mode { case user, root }
    let mode: Mode
    let base: ScratchDirectory
    /// The manager's user (nobody in `.user` mode, root in `.root` mode); files it must own get this.
    let uid: uid_t
    let gid: gid_t
    /// Each tracking hierarchy's cgroup for this manager (e.g. /sys/fs/cgroup/unified/htd-test-123.slice).
    /// The name ends in ".slice" so journald still derives _SYSTEMD_UNIT from the services' cgroup paths.
    let cgroups: [String]
    /// Files bind-mounted in the manager's mount namespace before it starts, as (source, target): e.g. a
    /// passwd and group with a package's system user in them, so units can name it. Set before `start()`.
    var bindMounts: [(source: String, target: String)] = []
    private var process: Process?
    private var stopped = false

    var runtimeDirectory: String { base.path + "/runtime" }
    var unitDirectory: String { base.path + "/units" }
    var home: String { base.path + "/home" }
    var configHome: String { base.path + "/config" }
    var stateHome: String { base.path + "/state" }
    var downloadsDirectory: String { base.path + "/downloads" }
    var launcherLog: String { base.path + "/launcher.log" }
    var journaldPIDFile: String { base.path + "/journald.pid" }
    var pid: Int32 { process?.processIdentifier ?? 0 }

    init(mode: Mode = .user) throws {
        if let reason = SystemdHost.managerUnavailableReason { throw TestFailure("no systemd manager here: \(reason)") }
        self.mode = mode
        let user = SystemdHost.managerUser!
        (uid, gid) = mode == .user ? (user.uid, user.gid) : (0, 0)
        base = try ScratchDirectory(template: mode == .user ? "/tmp/htd-XXXXXX" : SystemdHost.rootManagerBaseTemplate)
        let name = "htd-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).slice"
        cgroups = SystemdHost.trackingHierarchies.map { $0 + "/" + name }
        chmod(base.path, 0o755)
        for dir in [runtimeDirectory, unitDirectory, home, configHome, stateHome, downloadsDirectory] {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            chown(dir, uid, gid)
        }
        // A system manager's notify socket is reachable by every service user; so is this one's in .root mode.
        chmod(runtimeDirectory, mode == .user ? 0o700 : 0o755)
    }

    /// The environment of the manager, which a user manager passes on to its services.
    var managerEnvironment: [String: String] {
        SystemdHost.environment([
            "HOME": home, "USER": mode == .user ? "nobody" : "root", "LOGNAME": mode == .user ? "nobody" : "root",
            "XDG_RUNTIME_DIR": runtimeDirectory, "XDG_CONFIG_HOME": configHome, "XDG_STATE_HOME": stateHome,
            "XDG_DATA_HOME": home + "/.local/share", "XDG_DOWNLOAD_DIR": downloadsDirectory,
            // Only the test's units and the packaged defaults (default.target, sockets.target, ...).
            "SYSTEMD_UNIT_PATH": unitDirectory + ":/usr/lib/systemd/user",
        ])
    }

    /// Writes a unit file (or a drop-in, e.g. "halftunesd.service.d/test.conf") for the manager to load.
    func installUnit(_ name: String, contents: String) throws {
        let path = unitDirectory + "/" + name
        let dir = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// Writes a file owned by the manager's user (e.g. the daemon's configuration file).
    func writeUserFile(_ path: String, contents: String) throws {
        let dir = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        chown(dir, uid, gid)
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
        chown(path, uid, gid)
    }

    /// Starts the manager and waits until it reports "running" (or "degraded").
    func start(timeout: Double = 60) throws {
        for cg in cgroups {
            guard mkdir(cg, 0o755) == 0 else {
                throw TestFailure("cannot create cgroup \(cg): \(String(cString: strerror(errno)))")
            }
        }
        _ = FileManager.default.createFile(atPath: launcherLog, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: launcherLog))
        defer { try? log.close() }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try SystemdHost.requireTool("unshare", package: "util-linux"))
        let systemd = try SystemdHost.requireTool("systemd")
        let exec = mode == .user
            ? [try SystemdHost.requireTool("setpriv", package: "util-linux"), "--reuid=\(uid)", "--regid=\(gid)",
               "--clear-groups", systemd, "--user"]
            : [systemd, "--user"]
        p.arguments = ["--mount", "--propagation", "private", "/bin/sh", "-c", Self.launcherScript, "launcher",
                       cgroups.joined(separator: " "), "\(uid):\(gid)", journaldPIDFile,
                       try SystemdHost.requireTool("systemd-journald"),
                       bindMounts.map { $0.source + ":" + $0.target }.joined(separator: " ")] + exec
        p.environment = managerEnvironment
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = log
        p.standardError = log
        try p.run()
        process = p
        try eventually("the user manager to be running", timeout: timeout) { () -> Bool? in
            guard p.isRunning else { throw TestFailure("the manager exited \(p.terminationStatus):\n\(launcherOutput())") }
            guard FileManager.default.fileExists(atPath: runtimeDirectory + "/systemd/private") else { return nil }
            let state = try systemctl(["is-system-running"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            return state == "running" || state == "degraded" ? true : nil
        }
        if mode == .root && chmod(runtimeDirectory + "/systemd/notify", 0o777) != 0 {
            throw TestFailure("cannot open the manager's notify socket to service users: \(String(cString: strerror(errno)))")
        }
    }

    /// Root stages the namespace, starts journald, then execs the manager (through setpriv in .user mode).
    /// Arguments: cgroups, uid:gid, journald pid file, systemd-journald, bind mounts ("source:target ..."),
    /// then the manager's command line.
    static let launcherScript = #"""
        set -eu
        cgroups=$1 owner=$2 pidfile=$3 journald=$4 binds=$5
        shift 5
        for cg in $cgroups; do echo $$ > "$cg/cgroup.procs"; chown -R "$owner" "$cg"; done
        for pair in $binds; do mount --bind "${pair%%:*}" "${pair#*:}"; done
        mount -t tmpfs -o mode=0755 tmpfs /run
        mkdir -p /run/systemd/system /run/systemd/user.conf.d /run/systemd/journald.conf.d /run/log /run/user \
          /run/systemd/inaccessible
        (cd /run/systemd/inaccessible && mkdir -m 0 dir && install -m 0 /dev/null reg && mkfifo -m 0 fifo &&
          mknod -m 0 chr c 0 0 && mknod -m 0 blk b 0 0)
        printf '%s\n' '[Manager]' DefaultCPUAccounting=no DefaultMemoryAccounting=no DefaultTasksAccounting=no \
          DefaultIOAccounting=no DefaultBlockIOAccounting=no DefaultIPAccounting=no \
          > /run/systemd/user.conf.d/50-halftunes-test.conf
        printf '%s\n' '[Journal]' Storage=volatile ReadKMsg=no ForwardToSyslog=no ForwardToWall=no Audit=no \
          > /run/systemd/journald.conf.d/50-halftunes-test.conf
        "$journald" </dev/null &
        echo $! > "$pidfile"
        i=0
        until [ -S /run/systemd/journal/stdout ] && [ -S /run/systemd/journal/socket ]; do
          i=$((i + 1)); [ "$i" -le 3000 ] || { echo "systemd-journald did not create its sockets" >&2; exit 1; }
          sleep 0.01
        done
        exec "$@"
        """#

    /// `systemctl --user ARGS` inside the manager's namespace, as the manager's user.
    @discardableResult
    func systemctl(_ args: [String], timeout: Double = 120) throws -> CommandResult {
        try runCommand(try SystemdHost.requireTool("nsenter", package: "util-linux"),
                       ["-t", "\(pid)", "-m"] + (mode == .user ? ["-S", "\(uid)", "-G", "\(gid)"] : []) + ["--",
                        try SystemdHost.requireTool("systemctl"), "--user", "--no-pager", "--no-ask-password"] + args,
                       environment: managerEnvironment, timeout: timeout)
    }

    /// `systemctl --user ARGS` that must succeed.
    @discardableResult
    func systemctlOK(_ args: [String], timeout: Double = 120) throws -> CommandResult {
        let r = try systemctl(args, timeout: timeout)
        guard r.status == 0 else { throw TestFailure("\(r)\n--- journal ---\n\(journalText())") }
        return r
    }

    /// One property of a unit (`systemctl --user show -p NAME --value UNIT`).
    func property(_ name: String, of unit: String) throws -> String {
        try systemctlOK(["show", "-p", name, "--value", unit]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `journalctl ARGS` inside the manager's namespace (root reads the journal of this journald).
    @discardableResult
    func journalctl(_ args: [String]) throws -> CommandResult {
        try runCommand(try SystemdHost.requireTool("nsenter", package: "util-linux"),
                       ["-t", "\(pid)", "-m", "--", try SystemdHost.requireTool("journalctl"), "--no-pager"] + args,
                       environment: SystemdHost.environment())
    }

    /// The whole journal as text, for failure messages.
    func journalText() -> String {
        guard pid > 0, process?.isRunning == true else { return "(manager not running)\n" + launcherOutput() }
        return (try? journalctl(["-o", "short-monotonic"]).output) ?? "(journalctl failed)"
    }

    func launcherOutput() -> String { (try? String(contentsOfFile: launcherLog, encoding: .utf8)) ?? "" }

    /// Stops the manager (it stops its services first), then ends whatever is left in its cgroups, and
    /// removes the cgroups and the temporary directory. Safe to call more than once.
    func stop() {
        guard !stopped else { return }
        stopped = true
        if let p = process, p.isRunning {
            // journald first, while the manager (its parent since the exec) is there to reap it.
            if let text = try? String(contentsOfFile: journaldPIDFile, encoding: .utf8),
               let jpid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), jpid > 1 {
                kill(jpid, SIGKILL)
                _ = try? eventually("systemd-journald to be reaped", timeout: 10) {
                    FileManager.default.fileExists(atPath: "/proc/\(jpid)") ? nil : true
                }
            }
            kill(p.processIdentifier, SIGTERM)
            let deadline = Date().addingTimeInterval(45)
            while p.isRunning && Date() < deadline { usleep(10_000) }
            if p.isRunning { kill(p.processIdentifier, SIGKILL) }
            p.waitUntilExit()
        }
        killCgroups()
        base.remove()
    }

    /// SIGKILLs every process still in this manager's cgroups, then removes them, deepest first.
    private func killCgroups() {
        for root in cgroups where FileManager.default.fileExists(atPath: root) {
            let dirs = cgroupDirectories(under: root)
            _ = try? eventually("the processes in \(root) to end", timeout: 15) { () -> Bool? in
                var alive = false
                for dir in dirs {
                    let text = (try? String(contentsOfFile: dir + "/cgroup.procs", encoding: .utf8)) ?? ""
                    for pid in text.split(separator: "\n").compactMap({ Int32($0) }) where pid > 1 {
                        alive = true
                        kill(pid, SIGKILL)
                    }
                }
                return alive ? nil : true
            }
            for dir in dirs.sorted(by: { $0.count > $1.count }) { rmdir(dir) }
        }
    }

    private func cgroupDirectories(under root: String) -> [String] {
        var result = [root]
        if let e = FileManager.default.enumerator(atPath: root) {
            while let rel = e.nextObject() as? String {
                var isDir: ObjCBool = false
                if FileManager.default.fileExists(atPath: root + "/" + rel, isDirectory: &isDir), isDir.boolValue {
                    result.append(root + "/" + rel)
                }
            }
        }
        return result
    }

    deinit { stop() }
}

/// Runs `body` with a started user manager; prints its journal when `body` fails; always stops it.
func withSystemdUserManager(_ mode: SystemdUserManager.Mode = .user,
                            prepare: (SystemdUserManager) throws -> Void = { _ in },
                            _ body: (SystemdUserManager) async throws -> Void) async throws {
    let manager = try SystemdUserManager(mode: mode)
    do {
        try prepare(manager)
        try manager.start()
        try await body(manager)
    } catch {
        print("---- systemd user manager journal ----\n\(manager.journalText())\n---- launcher ----\n\(manager.launcherOutput())")
        manager.stop()
        throw error
    }
    manager.stop()
}
