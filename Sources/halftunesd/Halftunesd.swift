// halftunesd: the background download daemon (thin: flags, configuration file, logging, then HalfTunesDaemon).
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

            Every option can also be set in the configuration file (key = value, keys named like the \
            options without "--"); options given here win. SIGHUP re-reads the file and applies log-level, \
            max-concurrent, max-connections-per-host, bandwidth-limit and exit-when-idle at once (limits set \
            with `halftunesctl limits` win over the file until set again). Under systemd the daemon uses the socket passed by \
            halftunesd.socket (FileDescriptorName=control), reports READY/STATUS/STOPPING, pings the \
            watchdog and logs to the journal with HALFTUNES_TASK=, HALFTUNES_SESSION= and HALFTUNES_URL= fields.
            """,
        version: HalfTunes.version)

    @Option(name: .long, help: ArgumentHelp(
        "Configuration file (default: /etc/halftunesd/halftunesd.conf as root, otherwise "
            + "$XDG_CONFIG_HOME/halftunesd/halftunesd.conf; a missing default file is fine).",
        valueName: "path"))
    var config: String?

    @Option(name: .long, help: ArgumentHelp("Control socket path (when not socket-activated).", valueName: "path"))
    var socket: String?

    @Option(name: .customLong("state-dir"), help: ArgumentHelp("Directory for the journal and lock file.", valueName: "path"))
    var stateDir: String?

    @Option(name: .customLong("downloads-dir"), help: ArgumentHelp("Default destination directory of new sessions.", valueName: "path"))
    var downloadsDir: String?

    @Option(name: .customLong("max-concurrent"), help: ArgumentHelp("Transfers running at once, daemon-wide (default: 6).", valueName: "n"))
    var maxConcurrent: String?

    @Option(name: .customLong("max-connections-per-host"), help: ArgumentHelp(
        "Transfers running at once to one host (scheme, host and port; default: 6).", valueName: "n"))
    var maxConnectionsPerHost: String?

    @Option(name: .customLong("bandwidth-limit"), help: ArgumentHelp(
        "Bytes per second across all transfers, with an optional k, M or G suffix (powers of 1024), e.g. 2M; "
            + "0 = unlimited (default).", valueName: "rate"))
    var bandwidthLimit: String?

    @Option(name: .customLong("min-free-space"), help: ArgumentHelp(
        "Free space downloads leave on their file system for the journal and everyone else: auto (1G or 5% of the "
            + "file system, whichever is less; default), 0, a size such as 2G, or a percentage such as 10%.",
        valueName: "size"))
    var minFreeSpace: String?

    @Option(name: .customLong("state-min-free-space"), help: ArgumentHelp(
        "Free space left on the state directory's file system: calls that would write to the journal below it are "
            + "refused (reads, pauses and cancels go on); same forms as --min-free-space (default: its value).",
        valueName: "size"))
    var stateMinFreeSpace: String?

    @Option(name: .customLong("max-disk-per-uid"), help: ArgumentHelp(
        "Disk each user's unfinished downloads and kept resume data may hold under the system daemon (the "
            + "daemon's own user and root: unlimited): unlimited, a size such as 50G, or a percentage of the "
            + "downloads file system such as 20% (default).", valueName: "size"))
    var maxDiskPerUID: String?

    @Option(name: .customLong("max-output-per-uid"), help: ArgumentHelp(
        "Bytes of unsent output all of one user's connections may hold together (default 134217728, 128 MiB); past it "
            + "the connection that crossed it is disconnected, like one that stopped reading.", valueName: "bytes"))
    var maxOutputPerUID: String?

    @Option(name: .customLong("max-input-per-uid"), help: ArgumentHelp(
        "Bytes of requests read and not yet answered all of one user's connections may hold together (default "
            + "16777216, 16 MiB); past it the daemon stops reading those of them with requests waiting.", valueName: "bytes"))
    var maxInputPerUID: String?

    @Option(name: .customLong("max-journal-per-uid"), help: ArgumentHelp(
        "What the journal may hold for each user under the system daemon (their unacknowledged events, data-task "
            + "bodies and finished tasks kept; the daemon's own user and root: unlimited), past which their new tasks "
            + "are refused: unlimited, a size such as 1G, or a percentage of the state file system such as 5% (default).",
        valueName: "size"))
    var maxJournalPerUID: String?

    @Option(name: .customLong("log-level"), help: ArgumentHelp(
        "trace, debug, info, notice, warning, error or critical (default: info).", valueName: "level"))
    var logLevel: String?

    @Option(name: .customLong("exit-when-idle"), help: ArgumentHelp(
        "When socket-activated, exit after this many seconds with no clients and no queued, running or waiting "
            + "task; the next connection starts the daemon again (default: 0, never).",
        valueName: "seconds"))
    var exitWhenIdle: String?

    @Option(name: .customLong("checkpoint-interval"), help: ArgumentHelp("Seconds between checkpoints of running transfers.", visibility: .hidden))
    var checkpointInterval: String?

    @Option(name: .customLong("max-pending-output"), help: ArgumentHelp("Bytes of unsent output after which a client that does not read is disconnected.", visibility: .hidden))
    var maxPendingOutput: String?

    @Option(name: .customLong("client-timeout"), help: ArgumentHelp(
        "Seconds a client may leave the daemon's output unread before it is disconnected (default: 60).",
        valueName: "seconds"))
    var clientTimeout: String?

    @Option(name: .customLong("socket-group"), help: ArgumentHelp(
        "Group of the socket file when halftunesd binds it itself (mode 0660); its members may use the daemon.",
        valueName: "group"))
    var socketGroup: String?

    @Option(name: .customLong("max-connections-per-uid"), help: ArgumentHelp(
        "Control connections one user may hold open at once (default: 64).", valueName: "n"))
    var maxConnectionsPerUID: String?

    @Option(name: .customLong("max-tasks-per-session"), help: ArgumentHelp(
        "Unfinished tasks one session may hold (default: 10000).", valueName: "n"))
    var maxTasksPerSession: String?

    @Option(name: .customLong("ca-file"), help: ArgumentHelp(
        "PEM certificate authorities trusted besides the system's, for https (an internal CA).", valueName: "path"))
    var caFile: String?

    @Option(name: .customLong("proxy"), help: ArgumentHelp(
        "The proxy for sessions without their own: http://[user:password@]host:port, socks5://host:port, "
            + "socks5h://host:port, or direct (default: http_proxy, https_proxy, all_proxy of the environment).",
        valueName: "url"))
    var proxy: String?

    @Option(name: .customLong("proxy-bypass"), help: ArgumentHelp(
        "Hosts that skip the proxy, like no_proxy: names (with their subdomains), IP addresses, CIDR ranges, or * "
            + "(default: no_proxy of the environment).", valueName: "hosts"))
    var proxyBypass: String?

    @Option(name: .customLong("netrc"), help: ArgumentHelp(
        "A netrc file whose credentials answer servers that ask, for the daemon's own user's tasks without their own; "
            + "none reads none (default: $NETRC, else ~/.netrc).", valueName: "path"))
    var netrc: String?

    @Option(name: .customLong("max-sessions-per-uid"), help: ArgumentHelp(
        "Sessions one user may hold (default: 1000).", valueName: "n"))
    var maxSessionsPerUID: String?

    @Option(name: .customLong("max-tasks-per-uid"), help: ArgumentHelp(
        "Unfinished tasks one user may hold across all its sessions (default: 100000).", valueName: "n"))
    var maxTasksPerUID: String?

    @Option(name: .customLong("max-pending-events-per-uid"), help: ArgumentHelp(
        "Unacknowledged events past which a user's sessions accept no new tasks (default: 1000000).", valueName: "n"))
    var maxPendingEventsPerUID: String?

    @Option(name: .customLong("max-resume-data-per-uid"), help: ArgumentHelp(
        "Partial files one user may keep as resume data at once (default: 200).", valueName: "n"))
    var maxResumeDataPerUID: String?

    @Option(name: .customLong("max-pending-events"), help: ArgumentHelp(
        "Unacknowledged events past which a session accepts no new tasks (default: 100000).", valueName: "n"))
    var maxPendingEvents: String?

    /// The values given as options, checked exactly as the configuration file's values are.
    func flagSettings() throws -> DaemonSettings {
        let given: [(SettingKey, String?)] = [
            (.socket, socket), (.stateDir, stateDir), (.downloadsDir, downloadsDir), (.maxConcurrent, maxConcurrent),
            (.maxConnectionsPerHost, maxConnectionsPerHost), (.bandwidthLimit, bandwidthLimit),
            (.logLevel, logLevel), (.exitWhenIdle, exitWhenIdle), (.checkpointInterval, checkpointInterval),
            (.maxPendingOutput, maxPendingOutput), (.clientTimeout, clientTimeout), (.socketGroup, socketGroup),
            (.maxConnectionsPerUID, maxConnectionsPerUID), (.maxTasksPerSession, maxTasksPerSession),
            (.maxPendingEvents, maxPendingEvents), (.maxSessionsPerUID, maxSessionsPerUID),
            (.maxTasksPerUID, maxTasksPerUID), (.maxPendingEventsPerUID, maxPendingEventsPerUID),
            (.caFile, caFile), (.proxy, proxy), (.proxyBypass, proxyBypass), (.netrc, netrc), (.minFreeSpace, minFreeSpace),
            (.stateMinFreeSpace, stateMinFreeSpace),
            (.maxDiskPerUID, maxDiskPerUID), (.maxJournalPerUID, maxJournalPerUID), (.maxOutputPerUID, maxOutputPerUID),
            (.maxInputPerUID, maxInputPerUID),
            (.maxResumeDataPerUID, maxResumeDataPerUID),
        ]
        var settings = DaemonSettings()
        for case let (key, value?) in given {
            do {
                try key.assign(value, to: &settings)
            } catch {
                throw ValidationError("\(key.flag) \(error.message)")
            }
        }
        return settings
    }

    func validate() throws {
        _ = try flagSettings()
        if let config, config.isEmpty { throw ValidationError("--config must name a file") }
    }

    func run() async throws {
        let logLevel = LogLevelControl(ResolvedSettings.defaultLogLevel)
        DaemonLogging.bootstrap(control: logLevel)
        let logger = Logger(label: "halftunesd")
        signal(SIGPIPE, SIG_IGN)
        // Over RLIMIT_FSIZE a write must fail with EFBIG (the task waits with `fileTooLarge`), not kill the daemon.
        signal(SIGXFSZ, SIG_IGN)

        let loader = ConfigurationLoader(flags: try flagSettings(), configPath: config)
        let settings: ResolvedSettings
        do {
            settings = try loader.load()
        } catch {
            logger.critical("halftunesd cannot start: \(error)")
            throw ExitCode(1)
        }
        logLevel.level = settings.logLevel

        let group: ServiceGroup
        do {
            group = try await Daemon.serviceGroup(settings: settings, loader: loader, logLevel: logLevel, logger: logger)
        } catch {
            logger.critical("halftunesd cannot start: \(error)")
            throw ExitCode(1)
        }
        do {
            try await group.run()
        } catch {
            logger.critical("halftunesd cannot run: \(error)")
            throw ExitCode(1)
        }
    }
}
