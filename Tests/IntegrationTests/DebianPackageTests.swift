import Foundation
import HalfTunesKit
import HalfTunesProtocol
import TestOrigin
import Testing

/// The Debian package (debian/, `make deb`) under a real systemd manager: its unpacked tree's sysusers.d and
/// tmpfiles.d files applied as its postinst applies them, its system units run as the `halftunesd` user they
/// name, and a member of the socket's group downloads through the packaged halftunesctl.
///
/// The package is `$HALFTUNES_DEB` when set (CI can name the release package), otherwise built here from the
/// binaries under test with `make deb SKIP_BUILD=1` (a test cannot run SwiftPM on the tree it runs from).
/// Maintainer scripts (`dpkg -i`, `apt-get remove`, `purge`) are exercised by `.ci/check-deb` on the CI host.
@Suite("the Debian package under a real systemd manager", .serialized,
       .enabled(if: SystemdHost.managerUnavailableReason == nil && SystemdHost.systemUnitUnavailableReason == nil,
                Comment(rawValue: "no systemd manager for the package's system units here: "
                        + (SystemdHost.managerUnavailableReason ?? SystemdHost.systemUnitUnavailableReason ?? ""))))
struct DebianPackageTests {
    /// The package to test: `$HALFTUNES_DEB`, or one built into `directory` from the binaries under test.
    static func package(buildingInto directory: String) throws -> String {
        if let deb = ProcessInfo.processInfo.environment["HALFTUNES_DEB"], !deb.isEmpty { return deb }
        let make = try SystemdHost.requireTool("make", package: "make")
        var env = SystemdHost.environment()
        env["HOME"] = ProcessInfo.processInfo.environment["HOME"] ?? "/root"
        let built = try runCommand(make, ["-C", Repository.root, "--no-print-directory", "deb", "SKIP_BUILD=1",
                                          "INSTALL_FROM=" + Binaries.directory, "DEB_DESTDIR=" + directory],
                                   environment: env, timeout: 900)
        // Leave the tree as it was: debian/halftunesd and debhelper's state go.
        _ = try? runCommand(Repository.path("debian/rules"), ["clean"], environment: env, currentDirectory: Repository.root)
        guard built.status == 0 else { throw TestFailure("make deb failed: \(built)") }
        let debs = try FileManager.default.contentsOfDirectory(atPath: directory).filter {
            $0.hasPrefix("halftunesd_\(HalfTunes.version)_") && $0.hasSuffix(".deb")
        }
        guard debs.count == 1 else { throw TestFailure("make deb made \(debs) in \(directory)") }
        return directory + "/" + debs[0]
    }

    /// uid and gid of `name` in a passwd-format file.
    static func ids(of name: String, in passwd: String) throws -> (uid: UInt32, gid: UInt32) {
        let text = try String(contentsOfFile: passwd, encoding: .utf8)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else {
            throw TestFailure("no \(name) in \(passwd):\n\(text)")
        }
        let f = line.split(separator: ":", omittingEmptySubsequences: false)
        guard f.count > 3, let uid = UInt32(f[2]), let gid = UInt32(f[3]) else { throw TestFailure("bad entry \(line)") }
        return (uid, gid)
    }

    @Test func unpackedPackageServesMembersOfItsGroup() async throws {
        var root = "", daemonUser: (uid: UInt32, gid: UInt32) = (0, 0)
        let origin = try await TestOrigin.start()
        do {
            try await withSystemdUserManager(.root, prepare: { manager in
                root = manager.base.path + "/pkgroot"
                let deb = try Self.package(buildingInto: manager.base.path)
                let dpkgDeb = try SystemdHost.requireTool("dpkg-deb", package: "dpkg")
                let unpack = try runCommand(dpkgDeb, ["-x", deb, root], environment: SystemdHost.environment())
                try #require(unpack.status == 0, "\(unpack)")
                daemonUser = try Self.applyPostinst(root: root)
                manager.bindMounts = [(root + "/etc/passwd", "/etc/passwd"), (root + "/etc/group", "/etc/group")]
            }) { manager in
                try scenario(manager, origin, root: root, daemonUser: daemonUser)
            }
        } catch {
            try? await origin.shutdown()
            throw error
        }
        try await origin.shutdown()
    }

    /// What the package's postinst does, against the unpacked tree: systemd-sysusers with its sysusers.d
    /// file (on a copy of this host's user database), then systemd-tmpfiles --create with its tmpfiles.d file.
    static func applyPostinst(root: String) throws -> (uid: UInt32, gid: UInt32) {
        for file in ["passwd", "group", "shadow", "gshadow"] where FileManager.default.fileExists(atPath: "/etc/" + file) {
            try? FileManager.default.removeItem(atPath: root + "/etc/" + file)
            try FileManager.default.copyItem(atPath: "/etc/" + file, toPath: root + "/etc/" + file)
        }
        let sysusers = try runCommand(try SystemdHost.requireTool("systemd-sysusers"),
                                      ["--root=" + root, root + "/usr/lib/sysusers.d/halftunesd.conf"],
                                      environment: SystemdHost.environment())
        try #require(sysusers.status == 0, "\(sysusers)")
        let user = try ids(of: "halftunesd", in: root + "/etc/passwd")
        #expect(user.uid != 0 && user.uid < 1000, "halftunesd should be a system user, got uid \(user.uid)")
        let tmpfiles = try runCommand(try SystemdHost.requireTool("systemd-tmpfiles"),
                                      ["--root=" + root, "--create", root + "/usr/lib/tmpfiles.d/halftunesd.conf"],
                                      environment: SystemdHost.environment())
        try #require(tmpfiles.status == 0, "\(tmpfiles)")
        for (path, mode) in [("/var/lib/halftunesd", 0o711), ("/var/lib/halftunesd/downloads", 0o711)] {
            var st = stat()
            #expect(stat(root + path, &st) == 0, "\(path) was not created")
            #expect(st.st_uid == user.uid && st.st_gid == user.gid, "\(path) is owned by \(st.st_uid):\(st.st_gid)")
            #expect(Int(st.st_mode & 0o7777) == mode, "\(path) has mode \(String(st.st_mode & 0o7777, radix: 8))")
        }
        return user
    }

    /// The packaged halftunesctl as uid/gid nobody, with `groups` as its only supplementary groups.
    func packagedCtl(_ root: String, _ args: [String], socket: String, groups: [UInt32]) throws -> CommandResult {
        let nobody = try #require(SystemdHost.managerUser)
        let setpriv = try SystemdHost.requireTool("setpriv", package: "util-linux")
        let groupArgs = groups.isEmpty ? ["--clear-groups"] : ["--groups=" + groups.map(String.init).joined(separator: ",")]
        return try runCommand(setpriv, ["--reuid=\(nobody.uid)", "--regid=\(nobody.gid)"] + groupArgs
                                  + [root + "/usr/bin/halftunesctl"] + args,
                              environment: SystemdHost.environment(["HALFTUNES_SOCKET": socket]))
    }

    private func scenario(_ manager: SystemdUserManager, _ origin: TestOrigin, root: String,
                          daemonUser: (uid: UInt32, gid: UInt32)) throws {
        // The package's system units, as shipped; drop-ins change only what a test cannot have: the binary's
        // path (the unpacked tree), the socket's path and the XDG directories (not this host's /var/lib).
        for unit in SystemdUnitFiles.systemUnits {
            try manager.installUnit(unit, contents: try String(contentsOfFile: root + "/usr/lib/systemd/system/" + unit,
                                                               encoding: .utf8))
        }
        let state = manager.configHome + "/halftunesd"
        let socketPath = manager.base.path + "/control.sock"
        try manager.installUnit("halftunesd.service.d/test.conf", contents: """
            [Service]
            ExecStart=
            ExecStart=\(root)/usr/bin/halftunesd
            Environment=XDG_STATE_HOME=\(manager.configHome) XDG_DOWNLOAD_DIR=\(state)/downloads XDG_CONFIG_HOME=\(root)/etc
            """)
        try manager.installUnit("halftunesd.socket.d/test.conf", contents: """
            [Socket]
            ListenStream=
            ListenStream=\(socketPath)
            """)
        try manager.systemctlOK(["daemon-reload"])
        try manager.systemctlOK(["start", "halftunesd.socket"])
        var st = stat()
        try #require(stat(socketPath, &st) == 0, "the socket unit did not create \(socketPath)")
        #expect(st.st_gid == daemonUser.gid && Int(st.st_mode & 0o777) == 0o660,
                "socket is \(st.st_uid):\(st.st_gid) mode \(String(st.st_mode & 0o777, radix: 8))")

        // Not a member of the group: the socket turns the user away, and nothing starts.
        let outsider = try packagedCtl(root, ["status"], socket: socketPath, groups: [])
        #expect(outsider.status != 0 && outsider.stderr.contains("ermission denied"), "\(outsider)")

        // A member of the group downloads through the socket-activated system daemon.
        let body = TestOrigin.randomBytes(count: 3 * MiB, seed: 311)
        origin.put("/pkg.bin", body)
        let created = try packagedCtl(root, ["download", origin.url("/pkg.bin"), "--session", "deb.test", "--json", "--wait"],
                                      socket: socketPath, groups: [daemonUser.gid])
        try #require(created.status == 0, "\(created)")   // --wait: 0 once the task completed
        let first = try #require(created.stdout.split(separator: "\n").first, "no output: \(created)")
        let task = try JSONDecoder().decode(TaskInfo.self, from: Data(first.utf8))
        let shown = try packagedCtl(root, ["show", "\(task.id)", "--json"], socket: socketPath, groups: [daemonUser.gid])
        try #require(shown.status == 0, "\(shown)")
        let done = try JSONDecoder().decode(TaskInfo.self, from: Data(shown.stdout.utf8))
        #expect(done.state == .completed)
        let location = try #require(done.location)
        let nobody = try #require(SystemdHost.managerUser)
        #expect(location.hasPrefix(state + "/downloads/\(nobody.uid)/"), "\(location)")
        #expect(try sha256(ofFile: location) == TestOrigin.sha256Hex(body))

        // An upload of a file the member may read only through a supplementary group (owned by the daemon's
        // user so the daemon can read it, group 4242, mode 0640). The unit's ProtectProc=invisible hides the
        // client's /proc entry from the daemon: its groups must come from the connection (SO_PEERGROUPS).
        let extraGroup: UInt32 = 4242
        let uploadFile = manager.base.path + "/group-readable.bin"
        let uploadBody = TestOrigin.randomBytes(count: 256 * 1024, seed: 312)
        try Data(uploadBody).write(to: URL(fileURLWithPath: uploadFile))
        try #require(chown(uploadFile, daemonUser.uid, extraGroup) == 0 && chmod(uploadFile, 0o640) == 0)
        origin.acceptUploads("/up.bin")
        let refused = try packagedCtl(root, ["upload", uploadFile, origin.url("/up.bin"), "--session", "deb.test", "--wait"],
                                      socket: socketPath, groups: [daemonUser.gid])
        #expect(refused.status != 0 && origin.uploads("/up.bin").isEmpty, "uploaded without being in the file's group: \(refused)")
        let uploaded = try packagedCtl(root, ["upload", uploadFile, origin.url("/up.bin"), "--session", "deb.test", "--wait"],
                                       socket: socketPath, groups: [daemonUser.gid, extraGroup])
        #expect(uploaded.status == 0, "a group member's upload: \(uploaded)")
        #expect(origin.uploads("/up.bin").last?.sha256 == TestOrigin.sha256Hex(uploadBody))

        // It ran as the package's user, with the unit's sandbox.
        let pid = Int32(try manager.property("MainPID", of: "halftunesd.service")) ?? 0
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let uidLine = status.split(separator: "\n").first { $0.hasPrefix("Uid:") } ?? ""
        #expect(uidLine.split(separator: "\t").dropFirst().first.map(String.init) == "\(daemonUser.uid)", "\(status)")
        #expect(status.contains("NoNewPrivs:\t1"))
        var stateInfo = stat()
        #expect(stat(state, &stateInfo) == 0 && stateInfo.st_uid == daemonUser.uid, "the state directory is not halftunesd's")
    }
}
