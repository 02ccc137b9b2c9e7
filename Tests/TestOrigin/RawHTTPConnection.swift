// A minimal blocking HTTP/1.1 client over POSIX sockets, for tests that must control every request byte.
import Dispatch

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public struct RawHTTPError: Error, CustomStringConvertible {
    public var description: String
}

/// One response as read off the wire.
public struct RawHTTPResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// The body ended as its framing said (Content-Length reached / last chunk); false when the server closed early.
    public var complete: Bool

    /// The value of the first header field named `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// One blocking HTTP/1.1 connection to 127.0.0.1 (POSIX sockets, 30 s receive timeout), for tests that need exact
/// control of the request bytes and to see early closes. Bodies are held in memory: meant for small/medium bodies.
/// Blocking: use it inside `RawHTTPConnection.runBlocking { ... }`, not directly on the cooperative pool.
public final class RawHTTPConnection {
    private let fd: Int32
    private var pending: [UInt8] = []
    private var eof = false

    public init(port: Int) throws {
        #if canImport(Glibc)
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw RawHTTPError(description: "socket() failed: errno \(errno)") }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard rc == 0 else {
            let e = errno
            close(fd)
            throw RawHTTPError(description: "connect to 127.0.0.1:\(port) failed: errno \(e)")
        }
    }

    deinit { close(fd) }

    /// Sends `METHOD path HTTP/1.1` with `Host: 127.0.0.1`, `headers`, and `Connection: close` if asked.
    public func sendRequest(
        _ method: String, _ path: String, _ headers: [(String, String)] = [], close: Bool = false
    ) throws {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if close { text += "Connection: close\r\n" }
        text += "\r\n"
        let bytes = Array(text.utf8)
        #if canImport(Glibc)
        let flags = Int32(MSG_NOSIGNAL)
        #else
        let flags: Int32 = 0
        #endif
        let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, flags) }
        guard n == bytes.count else { throw RawHTTPError(description: "send failed: errno \(errno)") }
    }

    /// Reads more bytes into `pending`; false at EOF.
    private func fill() throws -> Bool {
        if eof { return false }
        var chunk = [UInt8](repeating: 0, count: 256 * 1024)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n < 0 { throw RawHTTPError(description: "recv failed (errno \(errno); 11 = 30 s timeout)") }
        if n == 0 {
            eof = true
            return false
        }
        pending += chunk[0..<n]
        return true
    }

    private func take(_ n: Int) -> [UInt8] {
        let out = Array(pending[0..<n])
        pending.removeFirst(n)
        return out
    }

    private func readLine() throws -> String? {
        while true {
            if let i = pending.firstIndex(of: 10) {
                return String(decoding: take(i + 1).dropLast(2), as: UTF8.self)
            }
            guard try fill() else { return nil }
        }
    }

    /// Reads one response; `isHead` for HEAD requests (no body).
    public func readResponse(isHead: Bool = false) throws -> RawHTTPResponse {
        guard let statusLine = try readLine() else { throw RawHTTPError(description: "connection closed before a response") }
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, let status = Int(parts[1]) else { throw RawHTTPError(description: "bad status line \(statusLine)") }
        var response = RawHTTPResponse(status: status, headers: [], body: [], complete: true)
        while let line = try readLine(), !line.isEmpty {
            let colon = line.firstIndex(of: ":")!
            let value = line[line.index(after: colon)...].drop { $0 == " " }
            response.headers.append((String(line[..<colon]), String(value)))
        }
        if isHead { return response }
        if response.header("Transfer-Encoding") == "chunked" {
            while true {
                guard let sizeLine = try readLine(), let size = Int(sizeLine, radix: 16) else {
                    response.complete = false
                    return response
                }
                while pending.count < size + 2, try fill() {}
                guard pending.count >= size + 2 else {
                    response.body += take(pending.count)
                    response.complete = false
                    return response
                }
                response.body += take(size)
                _ = take(2)
                if size == 0 { return response }
            }
        }
        if let length = response.header("Content-Length").flatMap({ Int($0) }) {
            while pending.count < length, try fill() {}
            response.body = take(min(length, pending.count))
            response.complete = response.body.count == length
        } else {
            while try fill() {}
            response.body = take(pending.count)
        }
        return response
    }

    /// Reads until at least `count` raw bytes (head included) have arrived or the server closes.
    public func readRaw(atLeast count: Int) throws {
        while pending.count < count, try fill() {}
    }

    /// True when the server closed the connection (EOF with nothing pending).
    public func isClosedByPeer() throws -> Bool {
        pending.isEmpty ? !(try fill()) : false
    }
}

extension RawHTTPConnection {
    /// Runs blocking socket work on its own Dispatch queue (an overcommitting thread, unlike the width-limited
    /// global queue) so neither the cooperative pool nor other blocked clients hold it up.
    public static func runBlocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue(label: "RawHTTPConnection").async { continuation.resume(with: Result { try work() }) }
        }
    }
}
