import HalfTunesProtocol

/// Whether a session may transfer under the network and power conditions, as URLSession's background
/// configuration rules have it. Pure: the daemon asks it when a task would be queued and when the conditions or
/// the session's configuration change.
public enum ConditionsGate {
    /// What stops a session's transfers: the reason its tasks carry, and whether they wait for better conditions
    /// (false: `waitsForConnectivity: false` and offline, so an attempt fails at once).
    public struct Block: Equatable, Sendable {
        public var reason: TaskError
        public var waits: Bool
    }

    /// nil when the session may transfer. Offline comes first, then a metered network the session may not use,
    /// then discretionary sessions (metered, or on battery).
    public static func block(_ c: SessionConfiguration, under conditions: SystemConditions) -> Block? {
        if !conditions.online {
            let waits = c.waitsForConnectivity ?? true
            return Block(reason: TaskError(code: TaskErrorCode.offline, message: waits
                    ? "Waiting for the network: it is offline (\(conditions.source))"
                    : "The network is offline (\(conditions.source)) and the session does not wait for connectivity"),
                         waits: waits)
        }
        if conditions.metered, c.allowsExpensiveNetworkAccess == false {
            return Block(reason: TaskError(code: TaskErrorCode.networkExpensive,
                                           message: "Waiting for an unmetered network: the session does not allow expensive network access"),
                         waits: true)
        }
        if c.isDiscretionary == true, conditions.metered || conditions.onBattery {
            let why = conditions.metered ? "the network is metered" : "the machine is on battery"
            return Block(reason: TaskError(code: TaskErrorCode.discretionary,
                                           message: "Waiting for good conditions (discretionary session): \(why)"),
                         waits: true)
        }
        return nil
    }
}
