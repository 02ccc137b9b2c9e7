// Daemon-wide limits: configured (file, flags, reloads), overridden by daemon.setLimits (journaled), applied live.
import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    /// Journal `settings` keys (the configuration file's names).
    enum LimitKey {
        static let maxConcurrent = "max-concurrent"
        static let maxConnectionsPerHost = "max-connections-per-host"
        static let bandwidthLimit = "bandwidth-limit"
    }

    /// The limits in effect.
    var limits: DaemonLimits {
        DaemonLimits(maxConcurrent: configuration.maxConcurrent,
                     maxConnectionsPerHost: configuration.maxConnectionsPerHost,
                     bandwidthLimit: configuration.bandwidthLimit)
    }

    /// At start: the configured limits, then the journaled `daemon.setLimits` values over them.
    func loadLimits() {
        configuredLimits = limits
        let stored = (try? journal.settings()) ?? [:]
        var overrides = DaemonSetLimitsParams()
        if let text = stored[LimitKey.maxConcurrent], let v = Int(text), Self.limitRange.contains(v) {
            overrides.maxConcurrent = v
        }
        if let text = stored[LimitKey.maxConnectionsPerHost], let v = Int(text), Self.limitRange.contains(v) {
            overrides.maxConnectionsPerHost = v
        }
        if let text = stored[LimitKey.bandwidthLimit], let v = Int64(text), ByteRate.problem(with: v) == nil {
            overrides.bandwidthLimit = v
        }
        limitOverrides = overrides
        applyLimits()
        if overrides.maxConcurrent != nil || overrides.maxConnectionsPerHost != nil || overrides.bandwidthLimit != nil {
            logger.info("limits set with daemon.setLimits are in effect (they win over the configuration file)",
                        metadata: ["maxConcurrent": "\(configuration.maxConcurrent)",
                                   "maxConnectionsPerHost": "\(configuration.maxConnectionsPerHost)",
                                   "bandwidthLimit": "\(configuration.bandwidthLimit)"])
        }
    }

    /// A reload read new configured limits; values set with `daemon.setLimits` still win.
    func setConfiguredLimits(_ configured: DaemonLimits) {
        configuredLimits = configured
        let o = limitOverrides
        let masked = [
            o.maxConcurrent.flatMap { $0 != configured.maxConcurrent ? LimitKey.maxConcurrent : nil },
            o.maxConnectionsPerHost.flatMap { $0 != configured.maxConnectionsPerHost ? LimitKey.maxConnectionsPerHost : nil },
            o.bandwidthLimit.flatMap { $0 != configured.bandwidthLimit ? LimitKey.bandwidthLimit : nil },
        ].compactMap { $0 }
        if !masked.isEmpty {
            let keys = masked.joined(separator: ", ")
            logger.notice("\(keys) keep the value set with daemon.setLimits (`halftunesctl limits` changes it); the configuration file's value is not used")
        }
        applyLimits()
    }

    /// `daemon.setLimits`: checks every given value, journals them, applies them to running transfers.
    /// The limits are shared by every user of the daemon, so only root and the daemon's own user may
    /// change them.
    func setLimits(_ p: DaemonSetLimitsParams, uid: UInt32) async throws(RPCError) -> DaemonLimits {
        let daemonUID = UInt32(geteuid())
        guard uid == 0 || uid == daemonUID else {
            throw RPCError(.permissionDenied, "Only root\(daemonUID == 0 ? "" : " and uid \(daemonUID), the daemon's user,") "
                + "may change the daemon-wide limits; they apply to every user of this daemon")
        }
        if let v = p.maxConcurrent, !Self.limitRange.contains(v) {
            throw RPCError.invalidParams("maxConcurrent must be from 1 to \(Self.limitRange.upperBound) (got \(v))")
        }
        if let v = p.maxConnectionsPerHost, !Self.limitRange.contains(v) {
            throw RPCError.invalidParams("maxConnectionsPerHost must be from 1 to \(Self.limitRange.upperBound) (got \(v))")
        }
        if let v = p.bandwidthLimit, let problem = ByteRate.problem(with: v) {
            throw RPCError.invalidParams("bandwidthLimit must be \(problem)")
        }
        var values: [String: String?] = [:]
        if let v = p.maxConcurrent { values[LimitKey.maxConcurrent] = String(v) }
        if let v = p.maxConnectionsPerHost { values[LimitKey.maxConnectionsPerHost] = String(v) }
        if let v = p.bandwidthLimit { values[LimitKey.bandwidthLimit] = String(v) }
        guard !values.isEmpty else { return limits }
        let settings = values
        try await journaling { try $0.setSettings(settings) } // in order: two calls' overrides apply as written
        if let v = p.maxConcurrent { limitOverrides.maxConcurrent = v }
        if let v = p.maxConnectionsPerHost { limitOverrides.maxConnectionsPerHost = v }
        if let v = p.bandwidthLimit { limitOverrides.bandwidthLimit = v }
        applyLimits()
        logger.notice("limits changed", metadata: ["maxConcurrent": "\(configuration.maxConcurrent)",
                                                   "maxConnectionsPerHost": "\(configuration.maxConnectionsPerHost)",
                                                   "bandwidthLimit": "\(configuration.bandwidthLimit)"])
        return limits
    }

    /// Puts the effective limits in place: more slots start queued tasks at once; fewer let running
    /// transfers finish (none is stopped); a bandwidth change reaches running transfers within 1/4 s.
    private func applyLimits() {
        let configured = configuredLimits ?? limits
        configuration.maxConcurrent = limitOverrides.maxConcurrent ?? configured.maxConcurrent
        configuration.maxConnectionsPerHost = limitOverrides.maxConnectionsPerHost ?? configured.maxConnectionsPerHost
        configuration.bandwidthLimit = limitOverrides.bandwidthLimit ?? configured.bandwidthLimit
        globalBandwidth.setRate(configuration.bandwidthLimit)
        feedAndRun(.limitsChanged(slotLimits))
        updateAllHostAllowances()
    }

    static let limitRange = 1...1000
}
