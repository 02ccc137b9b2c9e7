#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A connected Unix stream socket carrying `\n`-terminated lines, with blocking POSIX I/O.
///
/// One thread reads and one writes at a time; `shutdown()` may be called from any thread and
/// unblocks a reader. The descriptor is closed once no thread is inside a system call on it.
final class LineSocket: @unchecked Sendable {
    /// Thrown by `readLine(deadline:)` when the deadline passes first.
    struct Timeout: Error {}

    /// The longest line accepted from the daemon: a data task's response body (up to 16 MiB, base64 in
    /// `didComplete` and `task.get`) makes lines of up to ~23 MB.
    static let maxIncomingLineBytes = 32 << 20

    private let lock = Lock()
    private var fd: Int32
    private var isShutDown = false
    private var activeCalls = 0

    // Only touched by the reading thread.
    private var buffer: [UInt8] = []
    private var lineStart = 0
    private var scanned = 0
    private var chunk = [UInt8](repeating: 0, count: 64 * 1024)

    private init(fd: Int32) { self.fd = fd }

    deinit { if fd >= 0 { _ = systemClose(fd) } }

    static func connect(path: String) throws -> LineSocket {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !pathBytes.isEmpty, pathBytes.count < capacity else {
            throw HalfTunesClientError.io("invalid socket path '\(path)' (1 to \(capacity - 1) bytes)",
                                          errno: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
            raw[pathBytes.count] = 0
        }
        #if canImport(Darwin)
        let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        #else
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #endif
        guard fd >= 0 else { throw HalfTunesClientError.io("socket(AF_UNIX)", errno: errno) }
        #if canImport(Darwin)
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        #endif
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + pathBytes.count + 1)
        while true {
            let rc = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { systemConnect(fd, $0, length) }
            }
            if rc == 0 { break }
            let code = errno
            if code == EINTR { continue }
            if code == EISCONN { break }
            _ = systemClose(fd)
            if code == ENOENT || code == ECONNREFUSED {
                throw HalfTunesClientError.daemonNotRunning(socketPath: path)
            }
            throw HalfTunesClientError.io("cannot connect to \(path)", errno: code)
        }
        return LineSocket(fd: fd)
    }

    /// The uid of the listener at the other end, as it was when it listened (SO_PEERCRED; getpeereid), or nil
    /// where the system does not tell.
    func peerUID() -> UInt32? {
        #if canImport(Darwin)
        var uid = uid_t(0), gid = gid_t(0)
        return getpeereid(fd, &uid, &gid) == 0 ? uid : nil
        #else
        // struct ucred (Glibc hides it without _GNU_SOURCE).
        struct PeerCredentials { var pid: Int32 = 0; var uid: UInt32 = 0; var gid: UInt32 = 0 }
        var credentials = PeerCredentials()
        var length = socklen_t(MemoryLayout<PeerCredentials>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0,
              length == socklen_t(MemoryLayout<PeerCredentials>.size) else { return nil }
        return credentials.uid
        #endif
    }

    /// Writes `line` (which must end in `\n`) completely.
    func write(_ line: [UInt8]) throws {
        try withDescriptor { fd in
            try line.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    #if canImport(Darwin)
                    let n = send(fd, raw.baseAddress! + offset, raw.count - offset, 0)
                    #else
                    let n = send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                    #endif
                    if n >= 0 { offset += n; continue }
                    let code = errno
                    if code == EINTR { continue }
                    if code == EPIPE || code == ECONNRESET || code == ENOTCONN { throw HalfTunesClientError.connectionClosed }
                    throw HalfTunesClientError.io("send to halftunesd", errno: code)
                }
            }
        }
    }

    /// The next line without its `\n`; nil at end of stream (or after `shutdown()`).
    /// With a deadline (monotonic seconds, see `monotonicNow()`), throws `Timeout` when it passes.
    func readLine(deadline: Double? = nil) throws -> [UInt8]? {
        while true {
            if let newline = buffer[scanned...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(buffer[lineStart..<newline])
                lineStart = newline + 1
                scanned = lineStart
                if lineStart == buffer.count {
                    buffer.removeAll(keepingCapacity: true)
                    lineStart = 0
                    scanned = 0
                }
                return line
            }
            scanned = buffer.count
            if buffer.count - lineStart > Self.maxIncomingLineBytes {
                throw HalfTunesClientError.protocolViolation("a line longer than \(Self.maxIncomingLineBytes) bytes")
            }
            if lineStart > 0 {
                buffer.removeSubrange(0..<lineStart)
                scanned -= lineStart
                lineStart = 0
            }
            let count: Int
            do {
                count = try receive(deadline: deadline)
            } catch HalfTunesClientError.connectionClosed {
                return nil // shutdown() was called
            }
            if count == 0 {
                if buffer.count > lineStart && !wasShutDown {
                    throw HalfTunesClientError.protocolViolation("the connection ended in the middle of a line")
                }
                return nil
            }
            buffer.append(contentsOf: chunk[0..<count])
        }
    }

    /// One recv(2) into `chunk`; 0 at end of stream.
    private func receive(deadline: Double?) throws -> Int {
        try withDescriptor { fd -> Int in
            while true {
                if let deadline { try waitReadable(fd, until: deadline) }
                let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
                if n >= 0 { return n }
                let code = errno
                if code == EINTR { continue }
                if code == ECONNRESET { return 0 }
                throw HalfTunesClientError.io("recv from halftunesd", errno: code)
            }
        }
    }

    /// Ends the connection in both directions; a thread blocked in `readLine` returns nil.
    func shutdown() {
        lock.withLock {
            guard !isShutDown else { return }
            isShutDown = true
            _ = systemShutdown(fd, Int32(SHUT_RDWR))
            if activeCalls == 0 {
                _ = systemClose(fd)
                fd = -1
            }
        }
    }

    var wasShutDown: Bool { lock.withLock { isShutDown } }

    /// Whether the daemon has closed its end (e.g. it dropped an idle client); checked without
    /// blocking and without consuming anything.
    var peerHasClosed: Bool {
        (try? withDescriptor { fd -> Bool in
            var pfd = pollfd(fd: fd, events: Int16(POLLIN) | Int16(0x2000 /* POLLRDHUP */), revents: 0)
            guard poll(&pfd, 1, 0) == 1 else { return false }
            return Int32(pfd.revents) & (0x2000 | Int32(POLLHUP) | Int32(POLLERR)) != 0
        }) ?? true
    }

    private func withDescriptor<T>(_ body: (Int32) throws -> T) throws -> T {
        let fd = try lock.withLock { () throws -> Int32 in
            if isShutDown { throw HalfTunesClientError.connectionClosed }
            activeCalls += 1
            return self.fd
        }
        defer {
            lock.withLock {
                activeCalls -= 1
                if isShutDown && activeCalls == 0 && self.fd >= 0 {
                    _ = systemClose(self.fd)
                    self.fd = -1
                }
            }
        }
        do {
            return try body(fd)
        } catch let error as HalfTunesClientError {
            // After shutdown() the only honest report is that the connection is gone.
            if case .io = error, wasShutDown { throw HalfTunesClientError.connectionClosed }
            throw error
        }
    }

    private func waitReadable(_ fd: Int32, until deadline: Double) throws {
        while true {
            let remaining = deadline - monotonicNow()
            if remaining <= 0 { throw Timeout() }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let rc = poll(&pfd, 1, Int32(min(remaining * 1000, Double(Int32.max)).rounded(.up)))
            if rc > 0 { return }
            if rc == 0 { continue }
            if errno == EINTR { continue }
            throw HalfTunesClientError.io("poll on halftunesd socket", errno: errno)
        }
    }
}

/// Seconds on the monotonic clock.
func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

private func systemClose(_ fd: Int32) -> Int32 { close(fd) }
private func systemShutdown(_ fd: Int32, _ how: Int32) -> Int32 { shutdown(fd, how) }
private func systemConnect(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
    connect(fd, address, length)
}
