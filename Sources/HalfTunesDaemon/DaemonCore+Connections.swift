// Split downloads' extra connections in the core: each host's allowance follows its tasks, and what is in use
// goes back to the state's per-host limit.
import HalfTunesProtocol

extension DaemonCore {
    /// Every host's allowance again (the per-host limit changed).
    func updateAllHostAllowances() {
        let limits = state.limits
        for host in state.tasks.runningByHost.keys {
            hostConnections.setAllowance(state.extraAllowance(host: host, limits: limits), host: host)
        }
    }

    /// The extra connections in use to `host` changed (reported by `HostConnections`, off the core): the
    /// state's per-host limit counts them.
    func connectionsChanged(_ host: String) {
        feedAndRun(.connectionsChanged(host: host, extras: hostConnections.extras(host)))
    }

    /// The connections a running task uses now (1 plus the extras it holds), nil when it has no transfer.
    func connections(of t: ManagedTask) -> Int? {
        guard attempts[t.id] != nil, t.machine.state == .running, !t.completing else { return nil }
        return 1 + hostConnections.extras(t.hostKey, task: t.id)
    }

    /// The most connections a download of `t` may use: the task's setting, else its session's, else the
    /// default.
    func maxConnections(of t: ManagedTask, session: SessionConfiguration) -> Int {
        t.record.maxConnections ?? session.maxConnectionsPerTask ?? SessionConfiguration.defaultMaxConnectionsPerTask
    }
}
