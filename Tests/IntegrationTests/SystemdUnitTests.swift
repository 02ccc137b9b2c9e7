import Foundation
import Testing

/// The files in systemd/ and `make install`, checked with systemd's own tools (no manager needed).
@Suite("systemd units, sysusers/tmpfiles and make install", .serialized)
struct SystemdUnitTests {
    /// `systemd-analyze verify` on `units` in `directory`; fails on a non-zero exit or any message about them.
    func verify(_ units: [String], in directory: String, user: Bool) throws {
        let analyze = try SystemdHost.requireTool("systemd-analyze")
        var env = SystemdHost.environment()
        if user {
            let runtime = directory + "/runtime"
            try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
            chmod(runtime, 0o700)
            env["XDG_RUNTIME_DIR"] = runtime
        }
        let r = try runCommand(analyze, (user ? ["--user"] : []) + ["verify", "--recursive-errors=yes", "--man=no"] + units,
                               environment: env, currentDirectory: directory)
        #expect(r.status == 0, "\(r)")
        let complaints = r.output.split(separator: "\n").filter { $0.contains("halftunesd") }
        #expect(complaints.isEmpty, "\(r)")
    }

    @Test func systemUnitsPassVerify() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try SystemdUnitFiles.copy(SystemdUnitFiles.systemUnits, to: dir.path)
        try verify(["halftunesd.service", "halftunesd.socket"], in: dir.path, user: false)
    }

    @Test func userUnitsPassVerify() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try SystemdUnitFiles.copy(SystemdUnitFiles.userUnits + [SystemdUnitFiles.agentUnit], to: dir.path)
        try verify(["halftunesd.service", "halftunesd.socket", "halftunesd-agent.service"], in: dir.path, user: true)
    }

    /// The check above can fail: a unit whose ExecStart does not exist is rejected.
    @Test func verifyRejectsAMissingExecutable() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try SystemdUnitFiles.copy(SystemdUnitFiles.systemUnits, to: dir.path, daemon: dir.path + "/no-such-halftunesd")
        let r = try runCommand(try SystemdHost.requireTool("systemd-analyze"),
                               ["verify", "--recursive-errors=yes", "--man=no", "halftunesd.service"],
                               environment: SystemdHost.environment(), currentDirectory: dir.path)
        #expect(r.status != 0, "\(r)")
        #expect(r.output.contains("no-such-halftunesd"), "\(r)")
    }

    @Test func serviceExposureIsAtMost1_5() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try SystemdUnitFiles.copy(SystemdUnitFiles.systemUnits, to: dir.path)
        let r = try runCommand(try SystemdHost.requireTool("systemd-analyze"),
                               ["security", "--offline=yes", "--no-pager", "halftunesd.service"],
                               environment: SystemdHost.environment(), currentDirectory: dir.path)
        #expect(r.status == 0, "\(r)")
        let marker = "Overall exposure level for halftunesd.service:"
        let line = try #require(r.output.split(separator: "\n").first { $0.contains(marker) }, "\(r)")
        let rest = line[line.range(of: marker)!.upperBound...].trimmingCharacters(in: .whitespaces)
        let score = try #require(Double(rest.prefix { $0.isNumber || $0 == "." }), "no number in '\(line)'")
        #expect(score <= 1.5, "exposure \(score) > 1.5:\n\(r.stdout)")
    }

    @Test func unitsCarryTheSystemdContract() throws {
        let service = try Repository.read("systemd/halftunesd.service")
        let socket = try Repository.read("systemd/halftunesd.socket")
        func one(_ key: String, _ section: String = "Service", in text: String) -> String? {
            SystemdUnitFiles.values(key, in: section, of: text).last
        }
        #expect(one("Type", in: service) == "notify")
        #expect(one("ExecReload", in: service) == "/bin/kill -HUP $MAINPID")
        #expect(one("Restart", in: service) == "on-failure")
        #expect(one("WatchdogSec", in: service) != nil)
        #expect(one("TimeoutAbortSec", in: service) != nil)
        #expect(one("User", in: service) == "halftunesd")
        #expect(one("StateDirectory", in: service) == "halftunesd")
        #expect(SystemdUnitFiles.values("Environment", in: "Service", of: service).contains("SWIFT_BACKTRACE=enable=no"))
        #expect(one("RestrictAddressFamilies", in: service) == "AF_UNIX AF_INET AF_INET6")
        #expect(one("CapabilityBoundingSet", in: service) == "")
        // PrivateUsers= would show every other client's uid as 65534 and break peer-credential checks.
        #expect(one("PrivateUsers", in: service) == nil)
        // The socket must survive restarts: nothing of the service's may remove /run/halftunesd.
        #expect(one("RuntimeDirectory", in: service) == nil)
        #expect(one("ListenStream", "Socket", in: socket) == "/run/halftunesd/control.sock")
        #expect(one("FileDescriptorName", "Socket", in: socket) == "control")
        #expect(one("SocketMode", "Socket", in: socket) == "0660")
        #expect(one("SocketGroup", "Socket", in: socket) == "halftunesd")

        let userService = try Repository.read("systemd/user/halftunesd.service")
        let userSocket = try Repository.read("systemd/user/halftunesd.socket")
        #expect(one("Type", in: userService) == "notify")
        #expect(one("Restart", in: userService) == "on-failure")
        #expect(SystemdUnitFiles.values("Environment", in: "Service", of: userService).contains("SWIFT_BACKTRACE=enable=no"))
        #expect(one("ListenStream", "Socket", in: userSocket) == "%t/halftunesd/control.sock")
        #expect(one("FileDescriptorName", "Socket", in: userSocket) == "control")
    }

    /// The sysusers.d and tmpfiles.d files applied to an empty root: the user exists, the directories get
    /// its uid and the intended modes, and the socket's group is that user's group.
    @Test func sysusersAndTmpfilesApplyToAFreshRoot() throws {
        let root = try TempDir()
        defer { root.remove() }
        try FileManager.default.createDirectory(atPath: root.path + "/etc", withIntermediateDirectories: true)
        let sysusers = try runCommand(try SystemdHost.requireTool("systemd-sysusers"),
                                      ["--root=" + root.path, Repository.path("systemd/sysusers.d/halftunesd.conf")],
                                      environment: SystemdHost.environment())
        #expect(sysusers.status == 0, "\(sysusers)")
        let passwd = try String(contentsOfFile: root.path + "/etc/passwd", encoding: .utf8)
        let entry = try #require(passwd.split(separator: "\n").first { $0.hasPrefix("halftunesd:") }, "\(passwd)")
        let fields = entry.split(separator: ":", omittingEmptySubsequences: false)
        let uid = try #require(UInt32(fields[2])), gid = try #require(UInt32(fields[3]))
        #expect(fields[5] == "/var/lib/halftunesd")
        let group = try String(contentsOfFile: root.path + "/etc/group", encoding: .utf8)
        #expect(group.split(separator: "\n").contains { $0.hasPrefix("halftunesd:x:\(gid):") }, "\(group)")

        let tmpfiles = try runCommand(try SystemdHost.requireTool("systemd-tmpfiles"),
                                      ["--root=" + root.path, "--create", Repository.path("systemd/tmpfiles.d/halftunesd.conf")],
                                      environment: SystemdHost.environment())
        #expect(tmpfiles.status == 0, "\(tmpfiles)")
        for (path, mode) in [("/var/lib/halftunesd", 0o711), ("/var/lib/halftunesd/downloads", 0o711)] {
            var st = stat()
            #expect(stat(root.path + path, &st) == 0, "\(path) was not created")
            #expect(st.st_uid == uid && st.st_gid == gid, "\(path) is owned by \(st.st_uid):\(st.st_gid)")
            #expect(Int(st.st_mode & 0o7777) == mode, "\(path) has mode \(String(st.st_mode & 0o7777, radix: 8))")
        }
        let socket = try Repository.read("systemd/halftunesd.socket")
        #expect(SystemdUnitFiles.values("SocketGroup", in: "Socket", of: socket) == ["halftunesd"])
    }

    /// Every commented-out setting of systemd/halftunesd.conf.example, uncommented, is one the daemon accepts.
    @Test func exampleConfigurationIsAcceptedByTheDaemon() throws {
        let example = try Repository.read("systemd/halftunesd.conf.example")
        var keys: [String] = []
        let lines = example.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            // "#key = value" is a setting; "# text" is prose.
            guard line.hasPrefix("#"), line.dropFirst().first?.isLetter == true, let eq = line.range(of: " = ") else {
                return String(line)
            }
            let key = String(line[line.index(after: line.startIndex)..<eq.lowerBound])
            keys.append(key)
            // A value that differs from the default shows the file was read.
            return key == "max-concurrent" ? "max-concurrent = 3" : String(line.dropFirst())
        }
        #expect(keys == ["socket", "state-dir", "downloads-dir", "max-concurrent", "log-level", "exit-when-idle", "min-free-space", "max-disk-per-uid", "state-min-free-space",
                         "max-journal-per-uid", "proxy",
                         "proxy-bypass"])
        let dir = try TempDir()
        defer { dir.remove() }
        let path = dir.path + "/halftunesd.conf"
        try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        // The flags DaemonProcess passes (socket, directories) win over the file's system paths.
        let daemon = try DaemonProcess(extraArgs: ["--config", path])
        defer { daemon.kill9(); daemon.dir.remove() }
        let status = try daemon.client().status()
        #expect(status.maxConcurrent == 3, "\(daemon.log())")
        #expect(status.proxy == "http://proxy.example:3128 for http and https, bypassing localhost,127.0.0.0/8,.example.internal (configuration)",
                "\(status.proxy ?? "")")
        // The system daemon follows only its configuration: its unit unsets curl's proxy variables.
        let service = try Repository.read("systemd/halftunesd.service")
        let unset = SystemdUnitFiles.values("UnsetEnvironment", in: "Service", of: service).joined(separator: " ").split(separator: " ")
        #expect(Set(unset.map(String.init)) == ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
                                                "no_proxy", "NO_PROXY"])
    }

    /// `make install` into a temporary PREFIX (from the debug binaries), checked, then `make uninstall`.
    @Test func makeInstallAndUninstall() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let prefix = dir.path + "/usr", etc = dir.path + "/etc"
        let make = try SystemdHost.requireTool("make", package: "make")
        let vars = ["PREFIX=" + prefix, "SYSCONFDIR=" + etc, "POSTINSTALL=no", "SKIP_BUILD=1",
                    "INSTALL_FROM=" + Binaries.directory]
        let install = try runCommand(make, ["-C", Repository.root, "install"] + vars,
                                     environment: SystemdHost.environment())
        try #require(install.status == 0, "\(install)")

        #expect(access(prefix + "/bin/halftunesd", X_OK) == 0)
        #expect(access(prefix + "/bin/halftunesctl", X_OK) == 0)
        let unitDir = prefix + "/lib/systemd/system", userDir = prefix + "/lib/systemd/user"
        let service = try String(contentsOfFile: unitDir + "/halftunesd.service", encoding: .utf8)
        #expect(SystemdUnitFiles.values("ExecStart", in: "Service", of: service) == [prefix + "/bin/halftunesd"])
        let userService = try String(contentsOfFile: userDir + "/halftunesd.service", encoding: .utf8)
        #expect(SystemdUnitFiles.values("ExecStart", in: "Service", of: userService) == [prefix + "/bin/halftunesd"])
        let agent = try String(contentsOfFile: userDir + "/halftunesd-agent.service", encoding: .utf8)
        #expect(SystemdUnitFiles.values("ExecStart", in: "Service", of: agent) == [prefix + "/bin/halftunesctl agent"])
        try verify(["halftunesd.service", "halftunesd.socket"], in: unitDir, user: false)
        for file in ["lib/sysusers.d/halftunesd.conf", "lib/tmpfiles.d/halftunesd.conf", "lib/systemd/system/halftunesd.socket",
                     "lib/systemd/user/halftunesd.socket"] {
            #expect(FileManager.default.fileExists(atPath: prefix + "/" + file), "\(file) not installed")
        }
        #expect(FileManager.default.contents(atPath: etc + "/halftunesd/halftunesd.conf.example")
                == FileManager.default.contents(atPath: Repository.path("systemd/halftunesd.conf.example")))

        for binary in ["halftunesd", "halftunesctl"] {
            let bash = prefix + "/share/bash-completion/completions/" + binary
            let bashText = (try? String(contentsOfFile: bash, encoding: .utf8)) ?? ""
            #expect(bashText.contains("complete") && bashText.contains(binary), "bash completion for \(binary)")
            let syntax = try runCommand("/bin/bash", ["-n", bash], environment: SystemdHost.environment())
            #expect(syntax.status == 0, "\(syntax)")
            let zsh = (try? String(contentsOfFile: prefix + "/share/zsh/site-functions/_" + binary, encoding: .utf8)) ?? ""
            #expect(zsh.hasPrefix("#compdef \(binary)"), "zsh completion for \(binary)")
            let fish = (try? String(contentsOfFile: prefix + "/share/fish/vendor_completions.d/\(binary).fish",
                                    encoding: .utf8)) ?? ""
            #expect(fish.contains("complete -c '\(binary)'"), "fish completion for \(binary)")
        }

        let uninstall = try runCommand(make, ["-C", Repository.root, "uninstall"] + vars,
                                       environment: SystemdHost.environment())
        #expect(uninstall.status == 0, "\(uninstall)")
        let left = (FileManager.default.enumerator(atPath: dir.path)?.allObjects as? [String] ?? []).filter {
            var isDir: ObjCBool = false
            return FileManager.default.fileExists(atPath: dir.path + "/" + $0, isDirectory: &isDir) && !isDir.boolValue
        }
        #expect(left.isEmpty, "make uninstall left \(left)")
    }
}
