#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import ArgumentParser

/// Turning `upload`'s and `fetch`'s command-line values into request fields.
enum ExchangeArguments {
    /// An absolute path: a relative one is taken from the current directory.
    static func absolutePath(_ path: String) throws -> String {
        guard !path.hasPrefix("/") else { return path }
        guard let cwd = getcwd(nil, 0) else { throw ValidationError("cannot read the current directory") }
        defer { free(cwd) }
        let base = String(cString: cwd)
        return (base.hasSuffix("/") ? base : base + "/") + path
    }

    /// `--max-bytes`: a byte count with an optional k/M suffix (powers of 1024), from 1 to 16 MiB.
    static func byteCount(_ text: String, option: String) throws -> Int64 {
        let multipliers: [Character: Int64] = ["k": 1 << 10, "K": 1 << 10, "m": 1 << 20, "M": 1 << 20]
        var digits = Substring(text)
        var multiplier: Int64 = 1
        if let last = digits.last, let m = multipliers[last] {
            multiplier = m
            digits = digits.dropLast()
        }
        guard let n = Int64(digits), n > 0, n <= (16 << 20) / multiplier else {
            throw ValidationError("\(option) must be a byte count from 1 to 16M (e.g. 65536, 512k, 4M), got '\(text)'")
        }
        return n * multiplier
    }
}
