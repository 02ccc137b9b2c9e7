// Expected checksums of downloads: parsing "sha256:<hex>" and digesting a file (blocking; call off the actor).
import Crypto
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
import Darwin
#endif

/// An expected digest, written `sha256:<64 hex digits>` on the wire and in the journal.
public struct Checksum: Sendable, Equatable, CustomStringConvertible {
    public enum Algorithm: String, Sendable { case sha256 }

    public var algorithm: Algorithm
    /// Lowercase hex.
    public var hex: String

    /// Parses `sha256:<64 hex digits>` (hex in any case; the algorithm name in any case). nil when the text
    /// is anything else; `problem(with:)` says why.
    public init?(parsing text: String) {
        guard Self.problem(with: text) == nil, let colon = text.firstIndex(of: ":") else { return nil }
        algorithm = .sha256
        hex = text[text.index(after: colon)...].lowercased()
    }

    public init(algorithm: Algorithm = .sha256, hex: String) {
        self.algorithm = algorithm
        self.hex = hex.lowercased()
    }

    /// `sha256:<lowercase hex>`.
    public var description: String { "\(algorithm.rawValue):\(hex)" }

    /// Why `text` is not a usable checksum, as a sentence completing "checksum ...", or nil when it is.
    public static func problem(with text: String) -> String? {
        guard let colon = text.firstIndex(of: ":") else {
            return "must look like 'sha256:<64 hex digits>' (got '\(text.prefix(80))')"
        }
        let name = text[..<colon].lowercased()
        guard name == Algorithm.sha256.rawValue else {
            return "algorithm '\(name.prefix(20))' is not supported; use 'sha256:<64 hex digits>'"
        }
        let digits = text[text.index(after: colon)...]
        guard digits.utf8.count == 64, digits.utf8.allSatisfy(Self.isHexDigit) else {
            return "must have exactly 64 hex digits after 'sha256:' (got \(digits.utf8.count) characters)"
        }
        return nil
    }

    private static func isHexDigit(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46)
    }

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
