import ArgumentParser
import HalfTunesKit

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show the daemon's version, uptime, task counts and rate.")

    @OptionGroup var options: GlobalOptions

    func run() throws {
        let status = try options.client().status()
        if options.json { return try Console.json(status) }
        Console.out("halftunesd \(status.version) (pid \(status.pid)), up \(Formatting.duration(status.uptimeSeconds))")
        let counts = TaskState.allCases.map { "\(status.tasks[$0.rawValue] ?? 0) \($0.rawValue)" }
        Console.out("tasks:    \(counts.joined(separator: ", "))")
        Console.out("sessions: \(status.sessions)")
        Console.out("rate:     \(Formatting.rate(status.downloadRate)) (at most \(status.maxConcurrent) transfers at once)")
        if let transfers = status.transfers, let connections = status.connections {
            Console.out("running:  \(transfers) transfer\(transfers == 1 ? "" : "s") over \(connections) connection\(connections == 1 ? "" : "s")")
        }
        if let c = status.conditions {
            Console.out("network:  \(c.metered ? "metered" : "unmetered"), \(c.online ? "online" : "offline"), "
                + "\(c.onBattery ? "on battery" : "on power") (\(c.source == "none" ? "assumed: no NetworkManager or UPower" : c.source))")
        }
        if let proxy = status.proxy { Console.out("proxy:    \(proxy)") }
        if let limits = status.limits {
            Console.out("limits:   \(limits.maxConnectionsPerHost) connections per host, bandwidth \(ByteRate.format(limits.bandwidthLimit))")
        }
        Console.out("socket:   \(status.socketPath)")
        Console.out("state:    \(status.stateDirectory)")
    }
}
