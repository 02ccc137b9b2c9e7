import AsyncHTTPClient
import Crypto
import Foundation
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

/// The daemon as one `ServiceGroup` of three services, started in this order and shut down in reverse:
/// `CoreService` (state directory, journal replay, transfers), `ControlService` (the control socket) and
/// `SupervisorService` (READY/STATUS/WATCHDOG/STOPPING, SIGHUP reloads, the idle exit). SIGTERM and SIGINT
/// shut the group down gracefully: STOPPING=1, the socket closes, every transfer stops with a checkpoint and
/// the journal closes.
public enum Daemon {
    public static func serviceGroup(settings: ResolvedSettings, loader: ConfigurationLoader? = nil,
                                    logLevel: LogLevelControl? = nil, logger: Logger,
                                    environment: [String: String] = ProcessInfo.processInfo.environment)
        async throws -> ServiceGroup
    {
        // First of all, so that a SIGHUP during start-up is kept for later instead of killing the daemon.
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        let activated: ActivatedSocket?
        do {
            activated = try SocketActivation.controlSocket(logger: logger)
        } catch {
            throw DaemonError.socketActivation(error.description)
        }
        var config = settings.daemonConfiguration
        if let activated { config.socketPath = activated.path }
        let coreStarted = StartupHandoff<CoreHandle>()
        let serverStarted = StartupHandoff<ServerHandle>()
        let services: [any Service] = [
            CoreService(configuration: config, logger: logger, handoff: coreStarted),
            ControlService(activated: activated, limits: ClientLimits(config), logger: logger, core: coreStarted,
                           handoff: serverStarted),
            SupervisorService(settings: settings, loader: loader, logLevel: logLevel, logger: logger,
                              notifier: ServiceNotifier(environment: environment, logger: logger), hangups: hangups,
                              socketActivated: activated != nil, server: serverStarted),
        ]
        return ServiceGroup(configuration: .init(
            services: services.map { .init(service: $0, successTerminationBehavior: .gracefullyShutdownGroup) },
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
    }
}
