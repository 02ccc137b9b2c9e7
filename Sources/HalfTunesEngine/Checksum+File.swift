// Digesting a file for its Checksum (blocking; call off the actor).
import Crypto
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
import Darwin
#endif
import HalfTunesCore

extension Checksum {
    /// The SHA-256 of a whole file, read in 1 MiB chunks. Blocks: run it off the daemon's actor.
    public static func sha256(ofFile path: String) throws(FileIOError) -> Checksum {
        let fd: Int32
        do {
            fd = try SafePath.inParent(of: path) { dir, name in
                let fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
                guard fd >= 0 else { throw FileIOError(operation: "open", path: path, errno: errno) }
                return fd
            }
        } catch let error as FileIOError {
            throw error
        } catch {
            throw FileIOError(operation: "open", path: path, errno: EIO)
        }
        defer { close(fd) }
        return try sha256(ofDescriptor: fd, path: path)
    }

    /// The SHA-256 of the whole open file `fd` (read with pread from byte 0; `path` names it in errors).
    public static func sha256(ofDescriptor fd: Int32, path: String) throws(FileIOError) -> Checksum {
        var hasher = SHA256()
        let size = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        defer { buffer.deallocate() }
        var offset: off_t = 0
        while true {
            let n = pread(fd, buffer.baseAddress, size, offset)
            if n < 0 {
                if errno == EINTR { continue }
                throw FileIOError(operation: "read", path: path, errno: errno)
            }
            if n == 0 { break }
            offset += off_t(n)
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        }
        return Checksum(hex: Hex.string(hasher.finalize()))
    }
}
