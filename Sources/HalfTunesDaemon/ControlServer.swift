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

/// The JSON-RPC listener on a Unix stream socket.
final class ControlServer: Sendable {
    let channel: Channel
    let path: String

    private init(channel: Channel, path: String) {
        self.channel = channel
        self.path = path
    }

    static func start(path: String, group: EventLoopGroup, core: DaemonCore, logger: Logger,
                      outputLimit: Int) async throws -> ControlServer {
        try prepareSocketPath(path)
        let router = RPCRouter(core: core)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        ByteToMessageHandler(LineFrameDecoder(maxLength: HalfTunes.maxLineBytes)))
                    try channel.pipeline.syncOperations.addHandler(
                        ConnectionHandler(router: router, core: core, logger: logger, outputLimit: outputLimit))
                }
            }
        let old = umask(0o117)
        defer { umask(old) }
        let channel = try await bootstrap.bind(unixDomainSocketPath: path).get()
        chmod(path, 0o660)
        return ControlServer(channel: channel, path: path)
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

    func close() async {
        try? await channel.close()
        unlink(path)
    }
}
