import Foundation
import Testing

/// The state directory holds everyone's URLs, headers and the resume-data key: only the daemon's user may
/// read or change it.
@Suite("State directory")
struct StateDirectoryTests {
    @Test func theStateDirectoryAndItsFilesAreTheDaemonsAlone() throws {
        let daemon = try DaemonProcess(start: false)
        defer { daemon.kill9(); daemon.dir.remove() }
        // An existing directory open to everyone (made by hand, or by another tool) is closed on start;
        // search access stays (the system unit uses 0711 so users reach their own downloads).
        try FileManager.default.createDirectory(atPath: daemon.stateDir, withIntermediateDirectories: false)
        #expect(chmod(daemon.stateDir, 0o777) == 0)
        try daemon.start()
        var st = stat()
        #expect(stat(daemon.stateDir, &st) == 0 && st.st_mode & 0o777 == 0o711, "mode \(String(st.st_mode & 0o777, radix: 8))")
        for file in ["journal.sqlite", "halftunesd.lock", "resume-data.key"] {
            #expect(stat(daemon.stateDir + "/" + file, &st) == 0 && st.st_mode & 0o077 == 0,
                    "\(file): mode \(String(st.st_mode & 0o777, radix: 8))")
        }
    }

    @Test(.enabled(if: getuid() == 0, "needs root to give the directory to another uid"))
    func aStateDirectoryOfAnotherUserIsRefused() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let state = dir.path + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: false)
        #expect(chown(state, 65534, 65534) == 0)
        let r = try runCommand(Binaries.daemon, ["--config", "/dev/null", "--socket", dir.path + "/s.sock",
                                                 "--state-dir", state, "--downloads-dir", dir.path + "/dl"])
        #expect(r.status != 0 && r.stderr.contains("belongs to uid 65534"), "\(r)")
        #expect(!FileManager.default.fileExists(atPath: state + "/journal.sqlite"))
    }
}
