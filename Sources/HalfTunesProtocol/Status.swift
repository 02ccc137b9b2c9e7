public struct DaemonStatus: Codable, Sendable, Equatable {
    public var version: String
    public var pid: Int32
    public var uptimeSeconds: Double
    /// Task counts by state name; every state is present.
    public var tasks: [String: Int]
    public var sessions: Int
    /// Current aggregate download rate in bytes per second (over the last few seconds).
    public var downloadRate: Double
    public var maxConcurrent: Int
    public var socketPath: String
    public var stateDirectory: String
    /// The limits in effect (absent from daemons before 0.2).
    public var limits: DaemonLimits?
    /// Current aggregate upload rate in bytes per second.
    public var uploadRate: Double?
    /// Transfers holding a slot (at most `maxConcurrent`); `tasks.running` also counts downloads being verified
    /// or published (`TaskInfo.phase`).
    public var transfers: Int?
    /// HTTP connections of the transfers: one per transfer plus the extra ones of split downloads.
    public var connections: Int?
    /// The network and power conditions the daemon sees (NetworkManager and UPower on the system bus).
    public var conditions: SystemConditions?
    /// The daemon's proxy for sessions without their own, passwords as `***`: `direct`, or e.g.
    /// `http://proxy:3128 for http and https, bypassing localhost (configuration)`.
    public var proxy: String?

    public init(version: String, pid: Int32, uptimeSeconds: Double, tasks: [String: Int], sessions: Int,
                downloadRate: Double, maxConcurrent: Int, socketPath: String, stateDirectory: String,
                limits: DaemonLimits? = nil, uploadRate: Double? = nil, transfers: Int? = nil,
                connections: Int? = nil, conditions: SystemConditions? = nil, proxy: String? = nil) {
        self.conditions = conditions
        self.proxy = proxy
        self.version = version
        self.pid = pid
        self.uptimeSeconds = uptimeSeconds
        self.tasks = tasks
        self.sessions = sessions
        self.downloadRate = downloadRate
        self.maxConcurrent = maxConcurrent
        self.socketPath = socketPath
        self.stateDirectory = stateDirectory
        self.limits = limits
        self.uploadRate = uploadRate
        self.transfers = transfers
        self.connections = connections
    }
}

/// The network and power conditions the daemon sees. Without NetworkManager the network counts as unmetered and
/// online; without UPower, the machine as on power.
public struct SystemConditions: Codable, Sendable, Equatable {
    /// The network is metered (NetworkManager's `Metered`: yes or guess-yes).
    public var metered: Bool
    /// The network reaches the internet (NetworkManager's `Connectivity` full or unknown, and `State` connected).
    public var online: Bool
    /// The machine runs on battery (UPower's `OnBattery`).
    public var onBattery: Bool
    /// Where they come from: `networkmanager`, `upower`, `networkmanager+upower`, or `none`.
    public var source: String

    public init(metered: Bool, online: Bool, onBattery: Bool, source: String) {
        self.metered = metered
        self.online = online
        self.onBattery = onBattery
        self.source = source
    }

    /// What is assumed when nothing on the system bus says otherwise.
    public static let assumed = SystemConditions(metered: false, online: true, onBattery: false, source: "none")

    /// From NetworkManager's `Metered` (NMMetered: 1 yes, 3 guess-yes), `Connectivity` (NMConnectivityState:
    /// 1 none and 2 portal are offline — behind a captive portal every request gets the portal's page; 3 limited
    /// is not: NetworkManager says so whenever its internet check fails, and a network without the internet still
    /// reaches local servers) and `State` (NMState: below 50, not connected), and UPower's `OnBattery`; nil: that
    /// service is not there.
    public static func from(metered: UInt32?, connectivity: UInt32?, state: UInt32?, onBattery: Bool?) -> SystemConditions {
        let network = metered != nil || connectivity != nil || state != nil
        var online = true
        if let connectivity, connectivity == 1 || connectivity == 2 { online = false }
        if let state, state > 0, state < 50 { online = false }
        let sources = [network ? "networkmanager" : nil, onBattery != nil ? "upower" : nil].compactMap { $0 }
        return SystemConditions(metered: metered == 1 || metered == 3, online: online, onBattery: onBattery ?? false,
                                source: sources.isEmpty ? "none" : sources.joined(separator: "+"))
    }
}
