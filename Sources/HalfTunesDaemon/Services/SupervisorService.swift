import HalfTunesProtocol
import Logging
import ServiceLifecycle
import UnixSignals

/// The last service: once clients can connect, tells the service manager READY=1, keeps STATUS= current,
/// pings the watchdog, reloads the configuration on SIGHUP and watches for the idle exit (`ServiceSupervisor`).
/// Shut down first: STOPPING=1 goes out before the socket closes and transfers are checkpointed. When it
/// returns on its own (idle), the group shuts the other services down.
final class SupervisorService: Service {
    let settings: ResolvedSettings
    let loader: ConfigurationLoader?
    let logLevel: LogLevelControl?
    let logger: Logger
    let notifier: ServiceNotifier
    let hangups: UnixSignalsSequence
    let socketActivated: Bool
    let server: StartupHandoff<ServerHandle>

    init(settings: ResolvedSettings, loader: ConfigurationLoader?, logLevel: LogLevelControl?, logger: Logger,
         notifier: ServiceNotifier, hangups: UnixSignalsSequence, socketActivated: Bool,
         server: StartupHandoff<ServerHandle>) {
        self.settings = settings
        self.loader = loader
        self.logLevel = logLevel
        self.logger = logger
        self.notifier = notifier
        self.hangups = hangups
        self.socketActivated = socketActivated
        self.server = server
    }

    enum StopReason: Sendable { case signal, idle }

    func run() async throws {
        guard let started = await cancelWhenGracefulShutdown({ await self.server.value() }) else { return }
        let supervisor = ServiceSupervisor(core: started.core, server: started.server, connections: started.connections,
                                           notifier: notifier, logger: logger, settings: settings, loader: loader,
                                           logLevel: logLevel, socketActivated: socketActivated)
        let config = started.configuration
        notifier.ready(status: await started.core.serviceStatusLine())
        // The limit in effect: a `daemon.setLimits` value kept in the journal wins over the configuration's.
        let maxConcurrent = await started.core.status().maxConcurrent
        logger.info("halftunesd \(HalfTunes.version) ready", metadata: [
            "socket": "\(config.socketPath)", "socketActivated": "\(socketActivated)",
            "state": "\(config.stateDirectory)", "downloads": "\(config.downloadsDirectory)",
            "maxConcurrent": "\(maxConcurrent)",
        ])
        if settings.exitWhenIdle != nil && !socketActivated {
            logger.notice("exit-when-idle has no effect: halftunesd was not socket-activated, so nothing would start it again")
        }
        let watchdog = ServiceNotifier.watchdogInterval().map {
            supervisor.startWatchdog(interval: $0, on: started.server.channel.eventLoop)
        }
        defer { watchdog?.cancel() }

        let reason = await waitForStop(supervisor: supervisor)

        notifier.stopping(status: reason == .idle ? "Idle; stopping" : "Stopping: checkpointing transfers")
        logger.info(reason == .idle ? "shutting down (idle)" : "shutting down")
    }

    /// Serves SIGHUP reloads and the status/idle monitor until a graceful shutdown (or cancellation) or the
    /// idle exit.
    private func waitForStop(supervisor: ServiceSupervisor) async -> StopReason {
        let (stops, stopper) = AsyncStream.makeStream(of: StopReason.self)
        let hangups = self.hangups
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
}
