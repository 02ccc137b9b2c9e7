import ArgumentParser
import HalfTunesKit

/// Turning the queue and limit options (`--priority`, `--limit-rate`, `--sha256`, ...) into request fields.
enum ControlArguments {
    /// `--at`: an RFC 3339 date-time as is ("2026-11-25T22:00:00Z", "2026-11-25T23:00:00+01:00"), or "+"
    /// and a duration from now ("+90", "+30m", "+2h", "+1d"), as the RFC 3339 time the daemon takes.
    static func beginDate(_ text: String, now: Double = Timestamp.now()) throws -> String {
        if text.hasPrefix("+") {
            let seconds = try SessionArguments.duration(String(text.dropFirst()), option: "--at")
            return Timestamp.format(now + seconds)
        }
        guard Timestamp.parse(text) != nil else {
            throw ValidationError("--at '\(text)' must be an RFC 3339 date-time (e.g. 2026-11-25T22:00:00Z or "
                + "2026-11-25T23:00:00+01:00) or + and a duration from now (e.g. +30m, +2h)")
        }
        return text
    }

    /// Bytes per second from "512k", "2M", "1.5G" (powers of 1024), a plain number, or 0/none (unlimited).
    static func rate(_ text: String, option: String) throws -> Int64 {
        guard let value = ByteRate.parse(text), ByteRate.problem(with: value) == nil else {
            throw ValidationError("\(option) '\(text)' must be 0 (unlimited) or a rate of at least 1k: bytes per second "
                + "with an optional k, M or G suffix (powers of 1024), e.g. 512k or 2M")
        }
        return value
    }

    /// "sha256:<hex>" from 64 hex digits (a "sha256:" prefix is accepted too).
    static func checksum(sha256 text: String) throws -> String {
        var hex = Substring(text)
        if hex.lowercased().hasPrefix("sha256:") { hex = hex.dropFirst(7) }
        guard hex.count == 64, hex.allSatisfy(\.isHexDigit) else {
            throw ValidationError("--sha256 must be 64 hex digits (got \(hex.count) characters)")
        }
        return "sha256:" + hex.lowercased()
    }
}

extension TaskPriority: ExpressibleByArgument {}
