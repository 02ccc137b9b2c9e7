import Foundation
import HalfTunesProtocol
import Logging
import NIOCore
import NIOPosix

enum ControlServerError: Error, CustomStringConvertible {
    case alreadyRunning(String)
    case cannotPrepare(String)

    var description: String {
        switch self {
        case .alreadyRunning(let path): return "another halftunesd is already answering on \(path)"
        case .cannotPrepare(let detail): return detail
        }
    }
}

/// Where the control server listens: a path it binds itself, or a socket the service manager passed in.
enum ControlListener {
    case path(String)
    case activated(ActivatedSocket)
}

/// The JSON-RPC listener on a Unix stream socket.
final class ControlServer: Sendable {
    let channel: Channel
    let path: String
    /// Device and inode of the socket file this daemon created; nil for a socket it was given.
    private let createdFile: (device: UInt64, inode: UInt64)?

    private init(channel: Channel, path: String, createdFile: (device: UInt64, inode: UInt64)?) {
        self.channel = channel
        self.path = path
        self.createdFile = createdFile
    }

    static func start(listener: ControlListener, group: EventLoopGroup, core: DaemonCore, logger: Logger,
                      limits: ClientLimits, connections: ConnectionCounter) async throws -> ControlServer {
        let router = RPCRouter()
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(AcceptCounter(counter: connections))
                }
            }
            // A client that shuts its write side after its requests (`nc -N`, `socat`) still gets every answer.
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(RequestTimeoutHandler(timeout: limits.stallTimeout))
                    try channel.pipeline.syncOperations.addHandler(
                        ByteToMessageHandler(LineFrameDecoder(maxLength: HalfTunes.maxLineBytes)))
                    try channel.pipeline.syncOperations.addHandler(
                        ConnectionHandler(router: router, core: core, logger: logger, limits: limits))
                }
            }
        switch listener {
        case .activated(let socket):
            let channel = try await bootstrap.withBoundSocket(socket.fd).get()
            return ControlServer(channel: channel, path: socket.path, createdFile: nil)
        case .path(let path):
            try prepareSocketPath(path)
            let old = umask(0o117)
            defer { umask(old) }
            let channel = try await bootstrap.bind(unixDomainSocketPath: path).get()
            chmod(path, 0o660)
            if let group = limits.socketGroup, chown(path, uid_t.max, group) != 0 {
                let reason = String(cString: strerror(errno))
                try? await channel.close()
                unlink(path)
                throw ControlServerError.cannotPrepare("cannot give the socket \(path) to group \(group): \(reason)")
            }
            var st = stat()
            let created = lstat(path, &st) == 0 ? (device: UInt64(st.st_dev), inode: UInt64(st.st_ino)) : nil
            return ControlServer(channel: channel, path: path, createdFile: created)
        }
    }

    /// Creates the socket's directory, and replaces a stale socket file only after checking that no
    /// daemon answers on it.
    static func prepareSocketPath(_ path: String) throws {
        let dir = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o755])
        } catch {
            throw ControlServerError.cannotPrepare("cannot create the socket directory \(dir): \(error.localizedDescription)")
        }
        // A directory someone else made for us could let them swap the socket for theirs.
        if let problem = SocketDirectory.problem(socketPath: path, uid: geteuid()) {
            throw ControlServerError.cannotPrepare("refusing to listen on \(path): \(problem); remove it, or give "
                + "--socket in a directory of your own")
        }
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        guard (st.st_mode & S_IFMT) == S_IFSOCK else {
            throw ControlServerError.cannotPrepare("\(path) exists and is not a socket; refusing to replace it")
        }
        if someoneAnswers(path) { throw ControlServerError.alreadyRunning(path) }
        unlink(path)
    }

    static func someoneAnswers(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { Glibc.close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return false }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let result = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return result == 0
    }

    /// Stops accepting unless a client connected since `snapshot`; decided on the event loop that accepts,
    /// so no connection can slip in between the check and the close. Returns whether it closed.
    func closeIfNoClientSince(_ snapshot: ConnectionCounter.Snapshot, counter: ConnectionCounter) async -> Bool {
        let channel = self.channel
        let closed = try? await channel.eventLoop.submit { () -> Bool in
            let now = counter.snapshot
            guard now.open == 0, now.accepted == snapshot.accepted else { return false }
            channel.close(promise: nil)
            return true
        }.get()
        return closed ?? false
    }

    /// Stops accepting and removes the socket file, but only the one this daemon created (not a socket
    /// passed in by the service manager, nor a file someone else put at the path since).
    func close() async {
        try? await channel.close()
        guard let createdFile else { return }
        var st = stat()
        if lstat(path, &st) == 0, UInt64(st.st_dev) == createdFile.device, UInt64(st.st_ino) == createdFile.inode {
            unlink(path)
        }
    }
}
