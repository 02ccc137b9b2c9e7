import AsyncHTTPClient
import Crypto
import Foundation
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import ServiceLifecycle

/// What the core service hands to the control server once the journal is replayed.
struct CoreHandle: Sendable {
    let core: DaemonCore
    let configuration: DaemonConfiguration
    let eventLoopGroup: EventLoopGroup
}

/// The first service: locks the state directory, opens the journal, replays it into `DaemonCore`, and hands
/// the core on. Shut down last: every transfer stops with a checkpoint, then the HTTP client, the journal
/// (synced) and the event loop close.
final class CoreService: Service {
    let configuration: DaemonConfiguration
    let logger: Logger
    let handoff: StartupHandoff<CoreHandle>

    init(configuration: DaemonConfiguration, logger: Logger, handoff: StartupHandoff<CoreHandle>) {
        self.configuration = configuration
        self.logger = logger
        self.handoff = handoff
    }

    func run() async throws {
        let config = configuration
        // The conditions are watched from the start, so that recovery already knows whether a session's tasks
        // may transfer (and none starts for a moment on a metered network it may not use).
        let attached = NIOLockedValueBox<DaemonCore?>(nil)
        let conditions = SystemConditionsMonitor(logger: logger) { new, serial in
            guard let core = attached.withLockedValue({ $0 }) else { return } // before: `latest` keeps it
            Task { await core.conditionsChanged(new, serial: serial) }
        }
        conditions.start()
        let initial = await conditions.firstReport(timeout: 2)
        let resources: (lock: Int32, journal: Journal, group: MultiThreadedEventLoopGroup, clients: HTTPClients, core: DaemonCore)
        do {
            resources = try await Self.open(config, logger: logger, conditions: initial)
        } catch {
            await conditions.stop()
            handoff.abandon()
            throw error
        }
        defer { Glibc.close(resources.lock) }
        for problem in config.proxyProblems { logger.error("proxy variable not used: \(problem)") }
        logger.info("proxy: \(config.proxyRules.summary)", metadata: ["source": "\(config.proxyRules.source)"])
        let core = resources.core
        attached.withLockedValue { $0 = core }
        if let (latest, serial) = conditions.latest { await core.conditionsChanged(latest, serial: serial) } // one that came meanwhile
        handoff.provide(CoreHandle(core: resources.core, configuration: config, eventLoopGroup: resources.group))

        try? await gracefulShutdown() // returns on graceful shutdown, or at once when the group is cancelled

        await conditions.stop()
        await resources.core.shutdown()
        await resources.clients.shutdown()
        try? resources.journal.close()
        let (transactions, writes) = resources.journal.writeCounts
        logger.info("journal closed", metadata: ["transactions": "\(transactions)", "writes": "\(writes)",
                                                 "fsyncs": "\(resources.journal.durability.syncCount)"])
        try? await resources.group.shutdownGracefully()
        logger.info("stopped")
    }

    private static func open(_ config: DaemonConfiguration, logger: Logger, conditions: (SystemConditions, Int)?) async throws
        -> (lock: Int32, journal: Journal, group: MultiThreadedEventLoopGroup, clients: HTTPClients, core: DaemonCore)
    {
        let lockFD = try prepareStateDirectory(config)
        var opened: [() async -> Void] = [{ Glibc.close(lockFD) }]
        func unwind() async { for undo in opened.reversed() { await undo() } }
        do {
            let journal: Journal
            do {
                journal = try Journal(path: config.journalPath)
            } catch {
                throw DaemonError.journal("cannot open the journal at \(config.journalPath): \(error)")
            }
            opened.append { try? journal.close() }
            let resumeKey: SymmetricKey
            do {
                resumeKey = try ResumeDataKey.loadOrCreate(stateDirectory: config.stateDirectory)
            } catch {
                throw DaemonError.journal("cannot load the resume-data key: \(error)")
            }
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            opened.append { try? await group.shutdownGracefully() }
            let clients: HTTPClients
            do {
                clients = try HTTPClients(eventLoopGroup: group, caFile: config.caFile)
            } catch {
                throw DaemonError.configuration("ca-file \(config.caFile ?? ""): cannot load certificate authorities from it: \(error)")
            }
            opened.append { await clients.shutdown() }
            let crashRecord: CrashRecord
            do {
                crashRecord = try CrashRecord.open(stateDirectory: config.stateDirectory)
            } catch {
                throw DaemonError.stateDirectory("cannot open the crash record: \(error)")
            }
            let core = DaemonCore(configuration: config, journal: journal, clients: clients, logger: logger,
                                  resumeKey: resumeKey)
            if let (initial, serial) = conditions { await core.conditionsChanged(initial, serial: serial) }
            do {
                try await core.recover(crashRecord: crashRecord)
            } catch {
                await core.shutdown()
                throw DaemonError.journal("cannot replay the journal: \(error)")
            }
            return (lockFD, journal, group, clients, core)
        } catch {
            await unwind()
            throw error
        }
    }

    /// Creates the state directory (0700) and takes an exclusive lock so two daemons never share it. An
    /// existing one must belong to the daemon's user; read or write access for others is taken away (search
    /// access stays: the system unit makes it 0711 so users reach their own `downloads/<uid>/`).
    static func prepareStateDirectory(_ config: DaemonConfiguration) throws -> Int32 {
        do {
            try FileManager.default.createDirectory(atPath: config.stateDirectory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw DaemonError.stateDirectory("cannot create the state directory \(config.stateDirectory): \(error.localizedDescription)")
        }
        var st = stat()
        guard stat(config.stateDirectory, &st) == 0 else {
            throw DaemonError.stateDirectory("cannot inspect \(config.stateDirectory): \(String(cString: strerror(errno)))")
        }
        guard st.st_uid == geteuid() else {
            throw DaemonError.stateDirectory("the state directory \(config.stateDirectory) belongs to uid \(st.st_uid), not to "
                + "this daemon's user (uid \(geteuid())); whoever owns it could change the journal. Use a directory of your own")
        }
        if st.st_mode & 0o066 != 0, chmod(config.stateDirectory, st.st_mode & 0o7711) != 0 {
            throw DaemonError.stateDirectory("cannot take others' access to \(config.stateDirectory) away: \(String(cString: strerror(errno)))")
        }
        let fd = Glibc.open(config.lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw DaemonError.stateDirectory("cannot open \(config.lockPath): \(String(cString: strerror(errno)))")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            Glibc.close(fd)
            throw DaemonError.locked("another halftunesd is using the state directory \(config.stateDirectory)")
        }
        return fd
    }
}
