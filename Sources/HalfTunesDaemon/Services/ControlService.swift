import Logging
import ServiceLifecycle

/// What the control service hands to the supervisor once clients can connect.
struct ServerHandle: Sendable {
    let core: DaemonCore
    let server: ControlServer
    let connections: ConnectionCounter
    let configuration: DaemonConfiguration
}

/// The second service: once the core has replayed the journal, accepts clients on the control socket (the one
/// the service manager passed, or one it binds). Shut down before the core: no client is served while
/// transfers are being checkpointed.
final class ControlService: Service {
    let activated: ActivatedSocket?
    let limits: ClientLimits
    let logger: Logger
    let core: StartupHandoff<CoreHandle>
    let handoff: StartupHandoff<ServerHandle>

    init(activated: ActivatedSocket?, limits: ClientLimits, logger: Logger, core: StartupHandoff<CoreHandle>,
         handoff: StartupHandoff<ServerHandle>) {
        self.activated = activated
        self.limits = limits
        self.logger = logger
        self.core = core
        self.handoff = handoff
    }

    func run() async throws {
        guard let started = await cancelWhenGracefulShutdown({ await self.core.value() }) ?? nil else {
            handoff.abandon()
            return // the core did not start (its error stops the group), or the daemon stops during start-up
        }
        let connections = ConnectionCounter()
        let server: ControlServer
        do {
            server = try await ControlServer.start(
                listener: activated.map(ControlListener.activated) ?? .path(started.configuration.socketPath),
                group: started.eventLoopGroup, core: started.core, logger: logger, limits: limits,
                connections: connections)
        } catch {
            handoff.abandon()
            throw error
        }
        handoff.provide(ServerHandle(core: started.core, server: server, connections: connections,
                                     configuration: started.configuration))
        try? await gracefulShutdown()
        await server.close()
    }
}
