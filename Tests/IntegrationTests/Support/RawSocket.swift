import Foundation

/// A bare Unix-socket client for sending arbitrary bytes to the daemon (malformed frames included).
final class RawSocket: @unchecked Sendable {
    let fd: Int32
    private var buffer: [UInt8] = []

    init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { close(fd); throw TestFailure("connect failed: \(errno)") }
        var tv = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw TestFailure("send failed: \(errno)") }
            offset += n
        }
    }

    /// POLLRDHUP (Linux; Glibc's headers hide it without _GNU_SOURCE).
    static let pollRDHUP: Int32 = 0x2000

    /// Whether the peer has closed its end (without reading what it sent): waits up to `timeout` seconds.
    func peerClosed(within timeout: Double) -> Bool {
        var p = pollfd(fd: fd, events: Int16(Self.pollRDHUP), revents: 0)
        let rc = poll(&p, 1, Int32(timeout * 1000))
        return rc == 1 && (Int32(p.revents) & (Int32(Self.pollRDHUP) | Int32(POLLHUP))) != 0
    }

    /// The next line as a JSON object, or nil at EOF.
    func readObject() throws -> [String: Any]? {
        while true {
            if let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(buffer[..<nl])
                buffer.removeFirst(nl + 1)
                return try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any]
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return nil }
            buffer += chunk[..<n]
        }
    }

    deinit { close(fd) }
}

extension Dictionary where Key == String, Value == Any {
    var errorCode: Int? { (self["error"] as? [String: Any])?["code"] as? Int }
    var errorMessage: String? { (self["error"] as? [String: Any])?["message"] as? String }
}
