import Crypto
import Foundation

/// The daemon's secret for authenticating resume data: 32 random bytes in `<state>/resume-data.key`
/// (mode 0600), created once, atomically, and kept across restarts so resume data stays valid.
enum ResumeDataKey {
    static let fileName = "resume-data.key"

    struct KeyError: Error, CustomStringConvertible {
        var description: String
    }

    static func loadOrCreate(stateDirectory: String) throws -> SymmetricKey {
        let path = stateDirectory + "/" + fileName
        if let existing = try read(path) { return existing }
        var bytes = [UInt8](repeating: 0, count: 32)
        var rng = SystemRandomNumberGenerator()
        for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255, using: &rng) }
        let temp = path + ".new"
        unlink(temp)
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw KeyError(description: "cannot create \(temp): \(String(cString: strerror(errno)))") }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == 32, synced else {
            unlink(temp)
            throw KeyError(description: "cannot write \(temp): \(String(cString: strerror(errno)))")
        }
        // link() never replaces: if another process created the key meanwhile, theirs wins.
        if link(temp, path) != 0 && errno != EEXIST {
            let reason = String(cString: strerror(errno))
            unlink(temp)
            throw KeyError(description: "cannot install \(path): \(reason)")
        }
        unlink(temp)
        let dir = open(stateDirectory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 { fsync(dir); close(dir) }
        guard let key = try read(path) else { throw KeyError(description: "\(path) vanished after it was created") }
        return key
    }

    private static func read(_ path: String) throws -> SymmetricKey? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw KeyError(description: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 64)
        let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard n == 32 else {
            throw KeyError(description: "\(path) must hold exactly 32 bytes (it holds \(max(n, 0))); remove it to make a new key (outstanding resume data then becomes invalid)")
        }
        return SymmetricKey(data: Array(bytes.prefix(32)))
    }
}
