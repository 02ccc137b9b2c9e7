import AsyncHTTPClient
import Crypto
import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import UnixSignals

public enum DaemonError: Error, CustomStringConvertible {
    case stateDirectory(String)
    case locked(String)
    case journal(String)
    case socketActivation(String)
    case configuration(String)

    public var description: String {
        switch self {
        case .stateDirectory(let s), .locked(let s), .journal(let s), .socketActivation(let s), .configuration(let s): return s
        }
    }
}

/// The daemon as a service: replay the journal, then accept clients (on the socket the service manager
/// passed, or one it binds) and tell the manager READY=1; keep STATUS= current, ping the watchdog, reload
/// the configuration on SIGHUP, exit when idle if asked to; on graceful shutdown (SIGTERM, SIGINT) send
/// STOPPING=1, stop accepting, checkpoint every transfer and close the journal.
public final class DaemonService: Service {
    let settings: ResolvedSettings
    let loader: ConfigurationLoader?
    let logLevel: LogLevelControl?
    let logger: Logger
    let environment: [String: String]

    /// - Parameters:
    ///   - loader: re-read on SIGHUP; nil keeps `settings` for good.
    ///   - logLevel: the shared level that a reload changes.
    public init(settings: ResolvedSettings, loader: ConfigurationLoader? = nil, logLevel: LogLevelControl? = nil,
                logger: Logger, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.settings = settings
        self.loader = loader
        self.logLevel = logLevel
        self.logger = logger
        self.environment = environment
    }

    enum StopReason: Sendable { case signal, idle }

    public func run() async throws {
        // First of all, so that a SIGHUP during start-up is kept for later instead of killing the daemon.
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        let notifier = ServiceNotifier(environment: environment, logger: logger)
        let activated: ActivatedSocket?
        do {
            activated = try SocketActivation.controlSocket(logger: logger)
        } catch {
            throw DaemonError.socketActivation(error.description)
        }
        var config = settings.daemonConfiguration
        if let activated { config.socketPath = activated.path }
        let lockFD = try Self.prepareStateDirectory(config)
        defer { close(lockFD) }
        let journal: Journal
        do {
            journal = try Journal(path: config.journalPath)
        } catch {
            throw DaemonError.journal("cannot open the journal at \(config.journalPath): \(error)")
        }
        let resumeKey: SymmetricKey
        do {
            resumeKey = try ResumeDataKey.loadOrCreate(stateDirectory: config.stateDirectory)
        } catch {
            throw DaemonError.journal("cannot load the resume-data key: \(error)")
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let httpClient: HTTPClient
        do {
            httpClient = try HTTPClientFactory.make(eventLoopGroup: group, caFile: config.caFile)
        } catch {
            try? await group.shutdownGracefully()
            throw DaemonError.configuration("ca-file \(config.caFile ?? ""): cannot load certificate authorities from it: \(error)")
        }
        let core = DaemonCore(configuration: config, journal: journal, httpClient: httpClient, logger: logger,
                              resumeKey: resumeKey)
        do {
            try await core.recover()
        } catch {
            try? await httpClient.shutdown()
            try? await group.shutdownGracefully()
            throw DaemonError.journal("cannot replay the journal: \(error)")
        }
        let connections = ConnectionCounter()
        let server: ControlServer
        do {
            server = try await ControlServer.start(
                listener: activated.map(ControlListener.activated) ?? .path(config.socketPath), group: group,
                core: core, logger: logger, limits: ClientLimits(config), connections: connections)
        } catch {
            await core.shutdown()
            try? await httpClient.shutdown()
            try? await group.shutdownGracefully()
            throw error
        }
        let supervisor = ServiceSupervisor(core: core, server: server, connections: connections, notifier: notifier,
                                           logger: logger, settings: settings, loader: loader, logLevel: logLevel,
                                           socketActivated: activated != nil)
        notifier.ready(status: await core.serviceStatusLine())
        logger.info("halftunesd \(HalfTunes.version) ready", metadata: [
            "socket": "\(config.socketPath)", "socketActivated": "\(activated != nil)",
            "state": "\(config.stateDirectory)", "downloads": "\(config.downloadsDirectory)",
            "maxConcurrent": "\(config.maxConcurrent)",
        ])
        if settings.exitWhenIdle != nil && activated == nil {
            logger.notice("exit-when-idle has no effect: halftunesd was not socket-activated, so nothing would start it again")
        }
        let watchdog = ServiceNotifier.watchdogInterval().map {
            supervisor.startWatchdog(interval: $0, on: server.channel.eventLoop)
        }

        let reason = await waitForStop(supervisor: supervisor, hangups: hangups)

        notifier.stopping(status: reason == .idle ? "Idle; stopping" : "Stopping: checkpointing transfers")
        logger.info(reason == .idle ? "shutting down (idle)" : "shutting down")
        await server.close()
        await core.shutdown()
        watchdog?.cancel()
        try? await httpClient.shutdown()
        try? journal.close()
        try? await group.shutdownGracefully()
        logger.info("stopped")
    }

    /// Serves SIGHUP reloads and the status/idle monitor until a graceful shutdown or the idle exit.
    private func waitForStop(supervisor: ServiceSupervisor, hangups: UnixSignalsSequence) async -> StopReason {
        let (stops, stopper) = AsyncStream.makeStream(of: StopReason.self)
        let reloads = Task {
            for await _ in hangups { await supervisor.reload() }
        }
        let monitor = Task {
            if await supervisor.monitor() { stopper.yield(.idle) }
        }
        let reason = await withGracefulShutdownHandler {
            var iterator = stops.makeAsyncIterator()
            return await iterator.next() ?? .signal
        } onGracefulShutdown: {
            stopper.yield(.signal)
        }
        reloads.cancel()
        monitor.cancel()
        return reason
    }

    /// Creates the state directory (0700) and takes an exclusive lock so two daemons never share it. An
    /// existing one must belong to the daemon's user; read or write access for others is taken away (search
    /// access stays: the system unit makes it 0711 so users reach their own `downloads/<uid>/`).
    static func prepareStateDirectory(_ config: DaemonConfiguration) throws -> Int32 {
        do {
            try FileManager.default.createDirectory(atPath: config.stateDirectory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw DaemonError.stateDirectory("cannot create the state directory \(config.stateDirectory): \(error.localizedDescription)")
        }
        var st = stat()
        guard stat(config.stateDirectory, &st) == 0 else {
            throw DaemonError.stateDirectory("cannot inspect \(config.stateDirectory): \(String(cString: strerror(errno)))")
        }
        guard st.st_uid == geteuid() else {
            throw DaemonError.stateDirectory("the state directory \(config.stateDirectory) belongs to uid \(st.st_uid), not to "
                + "this daemon's user (uid \(geteuid())); whoever owns it could change the journal. Use a directory of your own")
        }
        if st.st_mode & 0o066 != 0, chmod(config.stateDirectory, st.st_mode & 0o7711) != 0 {
            throw DaemonError.stateDirectory("cannot take others' access to \(config.stateDirectory) away: \(String(cString: strerror(errno)))")
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
