// What the runner (DaemonCore) holds besides the state: its fixed services, the live transfers, meters, limit sources, timers.
import Crypto
import HalfTunesEngine
import HalfTunesJournal
import HalfTunesProtocol
import HalfTunesSystemd
import Logging

/// What the runner carries actions out with, fixed for the daemon's life: the journal, the HTTP clients, the
/// service manager, the clock, the disk ledger, the resume-data key, the per-host connections and the daemon-wide
/// bandwidth bucket.
struct CoreServices: Sendable {
    let journal: Journal
    /// The direct HTTP client and one per proxy in use.
    let clients: HTTPClients
    let logger: Logger
    let clock: @Sendable () -> Double
    let startedAt: Double
    /// What starts and watches the sessions' launch units (their `LaunchMachine`s are in the state).
    let launcher: UnitLauncher
    /// The bytes each uid's partial files hold, against `max-disk-per-uid` (DaemonCore+Transfers.swift).
    let diskLedger: DiskLedger
    /// Extra connections of split downloads, per host (DaemonCore.swift).
    let hostConnections: HostConnections
    /// The daemon-wide bandwidth bucket every transfer is metered against (rate: the global limit).
    let globalBandwidth: BandwidthBucket
    /// The daemon user's netrc file (nil: none is read), for its own tasks without credentials.
    let netrc: NetrcFile?
    /// The agents of the users (`agent.register`), which start their launch units in their own managers.
    let agents = AgentConnections()
    /// Desktop notifications for the daemon's own user's sessions (its session bus; other users' go to their agents).
    let notifications: NotificationPoster
}

/// The transfers the runner holds, by task: what the state only knows as flags.
struct LiveTransfers {
    /// The attempts in flight (`ManagedTask.attemptInFlight` in the state).
    var attempts: [Int64: LiveAttempt] = [:]
    /// Suspend and cancel requests waiting for a move in flight to end (`heldWhileMoving`, `moveEnded`).
    var moveWaiters: [Int64: [CheckedContinuation<Void, Never>]] = [:]
    /// The complete partial whose checksum was verified, held open for its move (the move publishes that very
    /// file, or fails if its path names another by then).
    var verifiedPartials: [Int64: OpenPartial] = [:]
}

/// What `daemon.status` reports of the bytes moving: received and sent (upload request bodies).
struct Meters {
    var received = ThroughputMeter()
    var sent = ThroughputMeter()
}

/// The runner's timers and background work: the housekeeping loop, the one timer for every retry, which wakes at
/// the earliest retry time `TaskTable` holds (`armRetryTimer`), and the latest of the journal work the runner
/// carries out in the background, one piece after another (`DaemonCore.inBackground`, `settled`).
struct CoreTimers {
    var housekeeping: Task<Void, Never>?
    var retryWake: Task<Void, Never>?
    var background: Task<Void, Never>?
}
