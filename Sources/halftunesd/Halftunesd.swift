// halftunesd: the background download daemon (thin: flags, logging, then HalfTunesDaemon).
import ArgumentParser
import HalfTunesDaemon
import HalfTunesProtocol
import Logging
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

@main
struct Halftunesd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "halftunesd",
        abstract: "Background download daemon: persistent sessions that survive crashes and restarts.",
        discussion: """
            Clients talk to it with halftunesctl or HalfTunesKit over a Unix socket (JSON-RPC 2.0, one object \
            per line). Defaults: as root /run/halftunesd/control.sock and /var/lib/halftunesd; otherwise \
            $XDG_RUNTIME_DIR/halftunesd/control.sock and $XDG_STATE_HOME/halftunesd.
            """,
        version: HalfTunes.version)

    @Option(name: .long, help: "Control socket path.")
    var socket: String?

    @Option(name: .customLong("state-dir"), help: "Directory for the journal and lock file.")
    var stateDir: String?

    @Option(name: .customLong("downloads-dir"), help: "Default destination directory of new sessions.")
    var downloadsDir: String?

    @Option(name: .customLong("max-concurrent"), help: "Transfers running at once, daemon-wide.")
    var maxConcurrent: Int = 6

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    @Option(name: .customLong("checkpoint-interval"), help: ArgumentHelp("Seconds between checkpoints of running transfers.", visibility: .hidden))
    var checkpointInterval: Double = 1.0

    @Option(name: .customLong("max-pending-output"), help: ArgumentHelp("Bytes of unsent output after which a client that does not read is disconnected.", visibility: .hidden))
    var maxPendingOutput: Int = 8 << 20

    func validate() throws {
        guard maxConcurrent >= 1 && maxConcurrent <= 1000 else {
            throw ValidationError("--max-concurrent must be between 1 and 1000")
        }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
        guard maxPendingOutput >= 4096 else { throw ValidationError("--max-pending-output must be at least 4096") }
        guard checkpointInterval > 0 && checkpointInterval <= 60 else {
            throw ValidationError("--checkpoint-interval must be between 0 and 60 seconds")
        }
        for (flag, value) in [("--socket", socket), ("--state-dir", stateDir), ("--downloads-dir", downloadsDir)] {
            if let value, !value.hasPrefix("/") { throw ValidationError("\(flag) must be an absolute path") }
        }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "halftunesd")
        signal(SIGPIPE, SIG_IGN)

        var config = DaemonConfiguration(
            socketPath: socket ?? DefaultPaths.socketPath(),
            stateDirectory: stateDir ?? DefaultPaths.stateDirectory(),
            downloadsDirectory: downloadsDir ?? DefaultPaths.downloadsDirectory(),
            maxConcurrent: maxConcurrent)
        config.checkpointInterval = checkpointInterval
        config.maxPendingOutputBytes = maxPendingOutput

        let service = DaemonService(configuration: config, logger: logger)
        let group = ServiceGroup(configuration: .init(
            services: [.init(service: service)],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
        do {
            try await group.run()
        } catch {
            logger.critical("halftunesd cannot run: \(error)")
            throw ExitCode(1)
        }
    }
}
