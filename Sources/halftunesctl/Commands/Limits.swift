import ArgumentParser
import HalfTunesKit

struct Limits: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "limits", abstract: "Show or change the daemon-wide limits (running transfers go on).",
        discussion: "Without options, shows the limits in effect. Values set here apply at once and are kept by "
            + "the daemon across restarts; they win over its configuration file until set again. Rates are bytes "
            + "per second with an optional k, M or G suffix in powers of 1024 (like curl): 2M = 2097152 B/s; "
            + "0 (or none) is unlimited.")

    @OptionGroup var options: GlobalOptions
    @Option(name: .customLong("max-concurrent"), help: ArgumentHelp("Transfers running at once (1-1000).", valueName: "n"))
    var maxConcurrent: Int?
    @Option(name: .customLong("per-host"), help: ArgumentHelp(
        "HTTP connections at once to one host (scheme, host and port): one per transfer, plus the extra ones of split downloads (1-1000).",
        valueName: "n"))
    var perHost: Int?
    @Option(help: ArgumentHelp("Bandwidth across all transfers.", valueName: "rate"))
    var bandwidth: String?

    func validate() throws {
        if let bandwidth { _ = try ControlArguments.rate(bandwidth, option: "--bandwidth") }
    }

    func run() throws {
        let client = try options.client()
        let limits: DaemonLimits
        if maxConcurrent == nil && perHost == nil && bandwidth == nil {
            limits = try client.limits()
        } else {
            limits = try client.setLimits(maxConcurrent: maxConcurrent, maxConnectionsPerHost: perHost,
                                          bandwidthLimit: try bandwidth.map { try ControlArguments.rate($0, option: "--bandwidth") })
        }
        if options.json { return try Console.json(limits) }
        Console.out("max concurrent:  \(limits.maxConcurrent) transfers")
        Console.out("per host:        \(limits.maxConnectionsPerHost) connections")
        Console.out("bandwidth:       \(ByteRate.format(limits.bandwidthLimit))")
    }
}
