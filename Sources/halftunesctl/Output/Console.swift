#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import HalfTunesKit

/// Unbuffered output: every call is written with write(2) at once, so pipes see lines immediately.
enum Console {
    static let stdoutIsTTY = isatty(STDOUT_FILENO) == 1

    /// Writes `line` and a newline to stdout.
    static func out(_ line: String) { write(line + "\n", to: STDOUT_FILENO) }

    /// Writes text as is to stdout (for in-place redraws).
    static func raw(_ text: String) { write(text, to: STDOUT_FILENO) }

    /// Writes "halftunesctl: <message>" to stderr.
    static func error(_ message: String) { write("halftunesctl: \(message)\n", to: STDERR_FILENO) }

    /// Writes a note (no prefix) to stderr.
    static func note(_ message: String) { write(message + "\n", to: STDERR_FILENO) }

    /// One JSON object on one line of stdout (sorted keys, like the wire).
    static func json<T: Encodable>(_ value: T) throws {
        let bytes = try WireCoding.line(value)
        write(bytes, to: STDOUT_FILENO)
    }

    /// Columns of the terminal on stdout ($COLUMNS, else the tty's size, else 80).
    static var width: Int {
        if let columns = getenv("COLUMNS").flatMap({ Int(String(cString: $0)) }), columns > 20 { return columns }
        var size = winsize()
        if ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 20 { return Int(size.ws_col) }
        return 80
    }

    static func write(_ text: String, to fd: Int32) { write(Array(text.utf8), to: fd) }

    static func write(_ bytes: [UInt8], to fd: Int32) {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = systemWrite(fd, raw.baseAddress! + offset, raw.count - offset)
                if n > 0 { offset += n; continue }
                if n < 0 && errno == EINTR { continue }
                return // the reader went away; nothing sensible is left to do with the output
            }
        }
    }
}

private func systemWrite(_ fd: Int32, _ pointer: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, pointer, count)
}

/// Seconds on the monotonic clock.
func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Sleeps for `seconds` (restarting after signals).
func sleepSeconds(_ seconds: Double) {
    var request = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9))
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
}
