import Foundation
import HalfTunesCore
import HalfTunesProtocol
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Keeps the service manager informed while the daemon runs: STATUS= updates, WATCHDOG=1 pings from the
/// event loop that serves clients, configuration reloads on SIGHUP, and the idle exit of a
/// socket-activated daemon.
final class ServiceSupervisor: Sendable {
    private let core: DaemonCore
    private let server: ControlServer
    private let connections: ConnectionCounter
    private let notifier: ServiceNotifier
    private let logger: Logger
    private let loader: ConfigurationLoader?
    private let logLevel: LogLevelControl?
    private let socketActivated: Bool
    /// The settings in effect (reloads change the ones that apply at run time).
    private let settings: NIOLockedValueBox<ResolvedSettings>

    init(core: DaemonCore, server: ControlServer, connections: ConnectionCounter, notifier: ServiceNotifier,
         logger: Logger, settings: ResolvedSettings, loader: ConfigurationLoader?, logLevel: LogLevelControl?,
         socketActivated: Bool) {
        self.core = core
        self.server = server
        self.connections = connections
        self.notifier = notifier
        self.logger = logger
        self.settings = NIOLockedValueBox(settings)
        self.loader = loader
        self.logLevel = logLevel
        self.socketActivated = socketActivated
    }

    private var exitWhenIdle: Double? { socketActivated ? settings.withLockedValue { $0.exitWhenIdle } : nil }

    // MARK: - Watchdog

    /// Pings WATCHDOG=1 every half `interval` from the event loop that serves clients, and only while the
    /// core has answered within `interval`: a stuck event loop or a stuck core both stop the pings.
    func startWatchdog(interval: Double, on eventLoop: EventLoop) -> RepeatedTask {
        let limit = TimeAmount.nanoseconds(Seconds.nanoseconds(interval))
        let heartbeat = NIOLockedValueBox((answered: NIODeadline.now(), probing: false, stalled: false))
        let (core, notifier, logger) = (self.core, self.notifier, self.logger)
        logger.debug("watchdog armed", metadata: ["interval": "\(interval)"])
        return eventLoop.scheduleRepeatedTask(initialDelay: .zero, delay: .nanoseconds(Seconds.nanoseconds(interval / 2))) { _ in
            let now = NIODeadline.now()
            let (healthy, changed, startProbe) = heartbeat.withLockedValue { h -> (Bool, Bool, Bool) in
                let healthy = now - h.answered <= limit
                let changed = healthy == h.stalled
                let startProbe = !h.probing
                h.stalled = !healthy
                h.probing = true
                return (healthy, changed, startProbe)
            }
            if healthy { notifier.watchdog() }
            if changed && !healthy {
                logger.error("the daemon core has not answered within the watchdog interval; watchdog pings stop")
            } else if changed {
                logger.notice("the daemon core answers again; watchdog pings resume")
            }
            if startProbe {
                Task {
                    await core.heartbeat()
                    heartbeat.withLockedValue { $0.answered = .now(); $0.probing = false }
                }
            }
        }
    }

    // MARK: - Status and idle exit

    /// Updates STATUS= about once a second and, when socket-activated with exit-when-idle, watches for
    /// idleness. Returns true once the daemon has stopped accepting because it was idle long enough;
    /// false when cancelled.
    func monitor() async -> Bool {
        var coreIdleSince: NIODeadline?
        while !Task.isCancelled {
            let period = exitWhenIdle.map { min(1, max(0.05, $0 / 4)) } ?? 1
            try? await Task.sleep(nanoseconds: UInt64(Seconds.nanoseconds(period)))
            if Task.isCancelled { return false }
            if notifier.isEnabled { notifier.status(await core.serviceStatusLine()) }
            guard let exitAfter = exitWhenIdle else {
                coreIdleSince = nil
                continue
            }
            let before = connections.snapshot
            guard await core.isIdle() else {
                coreIdleSince = nil
                continue
            }
            let now = NIODeadline.now()
            let idleSince = max(coreIdleSince ?? now, before.lastChange)
            coreIdleSince = coreIdleSince ?? now
            guard before.open == 0, now - idleSince >= .nanoseconds(Seconds.nanoseconds(exitAfter)) else { continue }
            if await server.closeIfNoClientSince(before, counter: connections) {
                logger.info("no clients and nothing pending; exiting until the next connection starts halftunesd again",
                            metadata: ["idleSeconds": "\(exitAfter)"])
                return true
            }
        }
        return false
    }

    // MARK: - Reload

    /// SIGHUP: RELOADING=1, re-read the configuration file (flags still win), apply what can change at run
    /// time (log-level, max-concurrent, max-connections-per-host, bandwidth-limit, exit-when-idle, proxy,
    /// proxy-bypass: attempts started from now on), then READY=1. A bad file changes nothing.
    func reload() async {
        notifier.reloading()
        if let loader {
            logger.info("reloading the configuration", metadata: ["config": "\(loader.path)"])
            do {
                let new = try loader.load()
                apply(new)
            } catch {
                logger.error("the configuration was not reloaded; the current settings stay in effect: \(error)")
            }
        }
        let current = settings.withLockedValue { $0 }
        await core.setConfiguredLimits(DaemonLimits(maxConcurrent: current.maxConcurrent,
                                                    maxConnectionsPerHost: current.maxConnectionsPerHost,
                                                    bandwidthLimit: current.bandwidthLimit))
        let (rules, problems) = current.proxyRules(environment: ProcessInfo.processInfo.environment)
        await core.setProxyRules(rules, problems: problems)
        notifier.ready(status: await core.serviceStatusLine())
    }

    private func apply(_ new: ResolvedSettings) {
        let changed = settings.withLockedValue { current -> [SettingKey] in
            let changed = new.changedKeys(from: current)
            current.logLevel = new.logLevel
            current.maxConcurrent = new.maxConcurrent
            current.maxConnectionsPerHost = new.maxConnectionsPerHost
            current.bandwidthLimit = new.bandwidthLimit
            current.exitWhenIdle = new.exitWhenIdle
            current.proxy = new.proxy
            current.proxyBypass = new.proxyBypass
            return changed
        }
        logLevel?.level = new.logLevel
        let values = new.asSettings
        for key in changed {
            var value = values.text(for: key) ?? ""
            if key == .proxy { value = ProxyServer.redact(value) } // never log a proxy's password
            if key.appliesOnReload {
                logger.notice("\(key.rawValue) is now \(value)")
            } else {
                logger.notice("\(key.rawValue) changed to \(value); this takes effect at the next restart")
            }
        }
        if changed.isEmpty { logger.info("the configuration is unchanged") }
        if changed.contains(.exitWhenIdle), new.exitWhenIdle != nil, !socketActivated {
            logger.notice("exit-when-idle has no effect: halftunesd was not socket-activated")
        }
    }
}
