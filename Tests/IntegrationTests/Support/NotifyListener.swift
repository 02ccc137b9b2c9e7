import Foundation

/// One sd_notify datagram: "KEY=value" lines.
struct NotifyMessage: CustomStringConvertible {
    /// Position among all messages the listener received (0-based).
    let index: Int
    let fields: [(key: String, value: String)]

    subscript(_ key: String) -> String? { fields.last { $0.key == key }?.value }

    var description: String { fields.map { "\($0.key)=\($0.value)" }.joined(separator: "\\n") }
}

/// A test-owned service-manager notify socket: an AF_UNIX datagram socket bound in a temporary directory,
/// read on a background thread. Point the daemon at it with NOTIFY_SOCKET.
final class NotifyListener: @unchecked Sendable {
    let path: String
    private let fd: Int32
    private let inbox = Inbox()

    /// What the reader thread shares with the listener (the thread must not keep the listener alive).
    private final class Inbox: @unchecked Sendable {
        let lock = NSLock()
        var received: [NotifyMessage] = []
        var stopping = false
        let finished = DispatchSemaphore(value: 0)

        var isStopping: Bool {
            lock.lock(); defer { lock.unlock() }
            return stopping
        }
    }

    init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket(AF_UNIX, SOCK_DGRAM) failed: \(errno)") }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            Glibc.close(fd)
            throw TestFailure("notify socket path too long: \(path)")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            Glibc.close(fd)
            throw TestFailure("cannot bind the notify socket \(path): \(errno)")
        }
        // Wake up now and then to notice close().
        var tv = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let readFD = fd, inbox = self.inbox
        Thread { Self.readLoop(fd: readFD, inbox: inbox) }.start()
    }

    private static func readLoop(fd: Int32, inbox: Inbox) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !inbox.isStopping {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { continue }
            let text = String(decoding: buffer[..<n], as: UTF8.self)
            let fields = text.split(separator: "\n").map { line -> (key: String, value: String) in
                guard let eq = line.firstIndex(of: "=") else { return (String(line), "") }
                return (String(line[..<eq]), String(line[line.index(after: eq)...]))
            }
            inbox.lock.lock()
            inbox.received.append(NotifyMessage(index: inbox.received.count, fields: fields))
            inbox.lock.unlock()
        }
        inbox.finished.signal()
    }

    var messages: [NotifyMessage] {
        inbox.lock.lock(); defer { inbox.lock.unlock() }
        return inbox.received
    }

    /// Messages that carry `key` (with `value`, when given).
    func messages(with key: String, _ value: String? = nil) -> [NotifyMessage] {
        messages.filter { m in m[key].map { value == nil || $0 == value } ?? false }
    }

    /// Waits for the first message after `after` (an index) that matches `predicate`.
    @discardableResult
    func wait(for what: String, after: Int = -1, timeout: Double = 60,
              _ predicate: @escaping (NotifyMessage) -> Bool) throws -> NotifyMessage {
        do {
            return try eventually(what, timeout: timeout) {
                messages.first { $0.index > after && predicate($0) }
            }
        } catch {
            throw TestFailure("\(error)\nnotify messages so far:\n" + messages.map { "  \($0)" }.joined(separator: "\n"))
        }
    }

    /// Stops the reader, closes the socket and removes its file.
    func close() {
        inbox.lock.lock()
        let wasStopping = inbox.stopping
        inbox.stopping = true
        inbox.lock.unlock()
        guard !wasStopping else { return }
        inbox.finished.wait()
        Glibc.close(fd)
        unlink(path)
    }

    deinit { close() }
}
