import AsyncHTTPClient
import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

public enum DaemonError: Error, CustomStringConvertible {
    case stateDirectory(String)
    case locked(String)
    case journal(String)

    public var description: String {
        switch self {
        case .stateDirectory(let s), .locked(let s), .journal(let s): return s
        }
    }
}

/// The daemon as a service: replay the journal, then accept clients; on graceful shutdown (SIGTERM,
/// SIGINT) stop accepting, checkpoint every transfer and close the journal.
public final class DaemonService: Service {
    let configuration: DaemonConfiguration
    let logger: Logger

    public init(configuration: DaemonConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    public func run() async throws {
        let config = configuration
        let lockFD = try Self.prepareStateDirectory(config)
        defer { close(lockFD) }
        let journal: Journal
        do {
            journal = try Journal(path: config.journalPath)
        } catch {
            throw DaemonError.journal("cannot open the journal at \(config.journalPath): \(error)")
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let httpClient = HTTPClientFactory.make(eventLoopGroup: group)
        let core = DaemonCore(configuration: config, journal: journal, httpClient: httpClient, logger: logger)
        do {
            try await core.recover()
        } catch {
            try? await httpClient.shutdown()
            try? await group.shutdownGracefully()
            throw DaemonError.journal("cannot replay the journal: \(error)")
        }
        let server: ControlServer
        do {
            server = try await ControlServer.start(path: config.socketPath, group: group, core: core, logger: logger,
                                                   outputLimit: config.maxPendingOutputBytes)
        } catch {
            await core.shutdown()
            try? await httpClient.shutdown()
            try? await group.shutdownGracefully()
            throw error
        }
        logger.info("halftunesd \(HalfTunes.version) ready", metadata: [
            "socket": "\(config.socketPath)", "state": "\(config.stateDirectory)",
            "downloads": "\(config.downloadsDirectory)", "maxConcurrent": "\(config.maxConcurrent)",
        ])

        try? await gracefulShutdown()

        logger.info("shutting down")
        await server.close()
        await core.shutdown()
        try? await httpClient.shutdown()
        try? journal.close()
        try? await group.shutdownGracefully()
        logger.info("stopped")
    }

    /// Creates the state directory (0700) and takes an exclusive lock so two daemons never share it.
    static func prepareStateDirectory(_ config: DaemonConfiguration) throws -> Int32 {
        do {
            try FileManager.default.createDirectory(atPath: config.stateDirectory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw DaemonError.stateDirectory("cannot create the state directory \(config.stateDirectory): \(error.localizedDescription)")
        }
        let fd = open(config.lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw DaemonError.stateDirectory("cannot open \(config.lockPath): \(String(cString: strerror(errno)))")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw DaemonError.locked("another halftunesd is using the state directory \(config.stateDirectory)")
        }
        return fd
    }
}
