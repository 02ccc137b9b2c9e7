#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
@testable import HalfTunesKit

/// A scripted stand-in for halftunesd: a Unix socket server on a temporary path that runs `handler`
/// on its own thread for every accepted connection (plain POSIX, no daemon needed).
final class FakeDaemon: @unchecked Sendable {
    let directory: String
    let socketPath: String
    private let listener: Int32
    private let lock = Lock()
    private var connections = 0

    init(handler: @escaping @Sendable (FakePeer) throws -> Void) throws {
        directory = try makeTemporaryDirectory()
        socketPath = directory + "/control.sock"
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw FakeError("socket: errno \(errno)") }
        var address = unixAddress(socketPath)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(listener, 16) == 0 else {
            close(listener)
            throw FakeError("bind/listen: errno \(errno)")
        }
        self.listener = listener
        BackgroundThread.start { [self] in
            while true {
                let fd = accept(listener, nil, nil)
                if fd < 0 {
                    if errno == EINTR { continue }
                    close(listener)
                    return
                }
                lock.withLock { connections += 1 }
                BackgroundThread.start {
                    let peer = FakePeer(fd: fd)
                    try? handler(peer)
                    peer.close()
                }
            }
        }
    }

    /// How many connections were accepted so far.
    var acceptedConnections: Int { lock.withLock { connections } }

    private var stopped = false

    /// Stops accepting and removes the socket and its directory.
    func stop() {
        let first = lock.withLock { () -> Bool in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        shutdown(listener, Int32(SHUT_RDWR)) // wakes the accept thread, which closes the descriptor
        unlink(socketPath)
        rmdir(directory)
    }
}

/// One accepted connection, seen from the fake daemon.
final class FakePeer: @unchecked Sendable {
    private let fd: Int32
    private var buffer: [UInt8] = []
    private let closeLock = Lock()
    private var closed = false

    init(fd: Int32) { self.fd = fd }

    /// The next request line, parsed; nil at end of stream.
    func readRequest() throws -> JSONValue? {
        while true {
            if let newline = buffer.firstIndex(of: 10) {
                let line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                return try WireCoding.decoder.decode(JSONValue.self, from: Data(line))
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            buffer += chunk[0..<n]
        }
    }

    /// Writes `text` followed by a newline.
    func send(_ text: String) { sendRaw(Array((text + "\n").utf8)) }

    /// Writes bytes as they are (lets a test split or join lines).
    func sendRaw(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            offset += n
        }
    }

    /// Answers `request` with `result` (a JSON text).
    func respond(to request: JSONValue, result: String) {
        send(#"{"jsonrpc":"2.0","id":\#(idText(request)),"result":\#(result)}"#)
    }

    /// Answers `request` with an error.
    func respond(to request: JSONValue, error: RPCError) throws {
        let errorText = String(decoding: try WireCoding.encoder.encode(error), as: UTF8.self)
        send(#"{"jsonrpc":"2.0","id":\#(idText(request)),"error":\#(errorText)}"#)
    }

    /// Sends an `event` notification.
    func send(event: Event) throws {
        send(try jsonText(RPCNotification(method: "event", params: JSONValue(encoding: event))))
    }

    func close() {
        closeLock.withLock {
            guard !closed else { return }
            closed = true
            shutdown(fd, Int32(SHUT_RDWR))
            Glibc.close(fd)
        }
    }

    private func idText(_ request: JSONValue) -> String {
        if case .int(let id)? = request["id"] { return String(id) }
        return "null"
    }
}

struct FakeError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

func jsonText<T: Encodable>(_ value: T) throws -> String {
    String(decoding: try WireCoding.encoder.encode(value), as: UTF8.self)
}

func makeTemporaryDirectory() throws -> String {
    var template = Array("/tmp/htkit-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw FakeError("mkdtemp: errno \(errno)") }
    return String(cString: made)
}

func unixAddress(_ path: String) -> sockaddr_un {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: Array(path.utf8))
    }
    return address
}

/// Waits until `condition` holds, checking every 5 ms, for at most `seconds`; returns whether it held.
func waitUntil(seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = monotonicNow() + seconds
    while monotonicNow() < deadline {
        if condition() { return true }
        usleep(5_000)
    }
    return condition()
}

/// Values collected from several threads.
final class Recorder<T>: @unchecked Sendable {
    private let lock = Lock()
    private var items: [T] = []
    func append(_ item: T) { lock.withLock { items.append(item) } }
    var all: [T] { lock.withLock { items } }
}

func sampleTask(id: Int64, session: String = "s", state: TaskState = .suspended) -> TaskInfo {
    TaskInfo(id: id, session: session, url: "http://127.0.0.1:1/file-\(id)", state: state, bytesReceived: 0,
             bytesDurable: 0, bytesExpected: nil, destination: "/tmp/file-\(id)", error: nil,
             createdAt: "2026-01-01T00:00:00.000Z", updatedAt: "2026-01-01T00:00:00.000Z", description: nil)
}

func sampleEvent(seq: Int64?, task: Int64?, _ payload: EventPayload) -> Event {
    Event(seq: seq, session: "s", task: task, time: "2026-01-01T00:00:00.000Z", payload: payload)
}
