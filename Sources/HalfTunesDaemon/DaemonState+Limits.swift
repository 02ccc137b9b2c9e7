// The daemon-wide limits as the state's: the configured ones (file, flags, reloads), daemon.setLimits's (journaled), which win, and the ones in effect.
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonState {
    /// One daemon-wide limit, by its name in the configuration file (and the journal's `settings` key).
    enum Limit: String, Sendable {
        case maxConcurrent = "max-concurrent"
        case maxConnectionsPerHost = "max-connections-per-host"
        case bandwidthLimit = "bandwidth-limit"

        /// What `max-concurrent` and `max-connections-per-host` (a session's `maxConcurrent` too) may be.
        static let countRange = 1...1000
    }

    /// The `daemon.setLimits` values among the journal's settings: each a number in its limit's range, else not
    /// used (a journal written by another version, or edited by hand).
    static func overrides(stored: [String: String]) -> DaemonSetLimitsParams {
        var overrides = DaemonSetLimitsParams()
        if let text = stored[Limit.maxConcurrent.rawValue], let v = Int(text), Limit.countRange.contains(v) {
            overrides.maxConcurrent = v
        }
        if let text = stored[Limit.maxConnectionsPerHost.rawValue], let v = Int(text), Limit.countRange.contains(v) {
            overrides.maxConnectionsPerHost = v
        }
        if let text = stored[Limit.bandwidthLimit.rawValue], let v = Int64(text), ByteRate.problem(with: v) == nil {
            overrides.bandwidthLimit = v
        }
        return overrides
    }

    /// Where the daemon-wide limits come from: the configuration (file and flags; `limitsConfigured` at start
    /// and on every reload) and `daemon.setLimits` (journaled; `limitsRestored` at start, `limitsWritten`), which
    /// wins per limit.
    struct LimitSources: Equatable, Sendable {
        var configured: DaemonLimits
        var overrides = DaemonSetLimitsParams()
        /// `daemon.setLimits` calls in the order their writes were submitted (the journal writes them in that order).
        var issued: UInt64 = 0
        /// Per limit, the latest call whose value is in `overrides`.
        var appliedBy: [Limit: UInt64] = [:]

        /// The limits in effect.
        var effective: DaemonLimits {
            DaemonLimits(maxConcurrent: overrides.maxConcurrent ?? configured.maxConcurrent,
                         maxConnectionsPerHost: overrides.maxConnectionsPerHost ?? configured.maxConnectionsPerHost,
                         bandwidthLimit: overrides.bandwidthLimit ?? configured.bandwidthLimit)
        }

        /// The configured limits a `daemon.setLimits` value hides (another value in effect), for the log.
        var masked: [Limit] {
            var hidden: [Limit] = []
            if let v = overrides.maxConcurrent, v != configured.maxConcurrent { hidden.append(.maxConcurrent) }
            if let v = overrides.maxConnectionsPerHost, v != configured.maxConnectionsPerHost { hidden.append(.maxConnectionsPerHost) }
            if let v = overrides.bandwidthLimit, v != configured.bandwidthLimit { hidden.append(.bandwidthLimit) }
            return hidden
        }

        /// The call with `ticket` was written: each of its values replaces the one in memory unless a later call's
        /// already did, so memory ends with what the journal ends with, whatever order the calls resume in.
        mutating func written(_ p: DaemonSetLimitsParams, ticket: UInt64) {
            func take(_ limit: Limit, _ apply: (inout DaemonSetLimitsParams) -> Void) {
                guard ticket > appliedBy[limit, default: 0] else { return }
                apply(&overrides)
                appliedBy[limit] = ticket
            }
            if let v = p.maxConcurrent { take(.maxConcurrent) { $0.maxConcurrent = v } }
            if let v = p.maxConnectionsPerHost { take(.maxConnectionsPerHost) { $0.maxConnectionsPerHost = v } }
            if let v = p.bandwidthLimit { take(.bandwidthLimit) { $0.bandwidthLimit = v } }
        }
    }

    /// The limits in effect now.
    var effectiveLimits: DaemonLimits { limitSources.effective }

    /// After a change of the sources: slots are granted within the limits in effect (more start queued tasks at
    /// once; fewer let running transfers finish: none is stopped), each host's allowance follows a new per-host
    /// limit, and a new daemon-wide bandwidth reaches running transfers (`setGlobalBandwidth`).
    mutating func limitSourcesChanged(now: Double, into actions: inout [Action]) {
        let effective = limitSources.effective
        let slots = SlotLimits(maxConcurrent: effective.maxConcurrent, maxConnectionsPerHost: effective.maxConnectionsPerHost)
        if slots.maxConnectionsPerHost != limits.maxConnectionsPerHost { tasks.markRunningHostsChanged() }
        limits = slots
        if effective.bandwidthLimit != globalBandwidth {
            globalBandwidth = effective.bandwidthLimit
            actions.append(.setGlobalBandwidth(rate: effective.bandwidthLimit))
        }
        grantSlots(limits, now: now, into: &actions)
    }
}
