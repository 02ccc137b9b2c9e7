// When a session's launchUnit is started, as a value: inputs in, actions out, the clock injected. No I/O.
import HalfTunesCore
import HalfTunesJournal

/// The relaunch rules of one session with a `launchUnit`, like `nsurlsessiond` relaunching an app for its
/// background session's events and BITS running its notify command until the job is acknowledged:
/// - events waiting unacknowledged while no client is subscribed start the unit (once: not while it runs);
/// - a unit that ends with events still unacknowledged, and no client subscribed, counts as a failure and is
///   started again after a backoff (10 s doubling up to 1 h); a client that acknowledged something while the unit
///   ran is no failure: newer events start it again at once;
/// - a start the service manager refuses is a failure too;
/// - acknowledging every event resets the failures, and nothing is started for events already acknowledged.
/// `record` is what the journal keeps (`sessions.launch`) and `session.open` shows.
struct LaunchMachine: Equatable, Sendable {
    enum Phase: Equatable, Sendable {
        /// Nothing started and nothing due.
        case idle
        /// `StartUnit` was asked; its answer is awaited.
        case starting
        /// The unit was started and has not ended yet (the runner watches it).
        case running
        /// A start is due at `record.nextAttemptAt`.
        case backoff
        /// The session's user has no agent connected (a session of another user than the daemon's): the start
        /// happens when one registers.
        case waitingForAgent
    }

    /// `record.lastResult` while no agent of the session's user is connected.
    static let waitingForAgent = "waitingForAgent"

    private(set) var phase: Phase = .idle
    private(set) var record: SessionLaunchRecord
    /// The session's events were acknowledged (some of them) since the unit was last started.
    private(set) var acknowledgedSinceStart = false

    static let firstDelay = 10.0
    static let longestDelay = 3600.0

    enum Input: Equatable, Sendable {
        /// Events wait unacknowledged and no client is subscribed: an event was journaled, the last subscriber
        /// left, the daemon started, or the session got its `launchUnit`.
        case unattended
        /// The service manager answered `StartUnit`: nil, started; else why not.
        case startAnswered(error: String?)
        /// The started unit ended (inactive or failed, no job pending): its service `Result` and main exit status,
        /// and whether events still wait unacknowledged and a client is subscribed.
        case unitEnded(result: String, exitStatus: Int32, pending: Bool, subscribed: Bool)
        /// Events were acknowledged; `all`: none is left.
        case acknowledged(all: Bool)
        /// The clock passed `record.nextAttemptAt`.
        case due(pending: Bool, subscribed: Bool)
        /// The start cannot be asked for: the session's user has no agent connected.
        case agentMissing
        /// An agent of the session's user registered; `pending`: events still wait and no client is subscribed.
        case agentAvailable(pending: Bool)
        /// The agent that was starting or watching the unit went away (the unit may still run in the user's
        /// manager: the next agent's start of a running unit only watches it).
        case agentLost
    }

    enum Action: Equatable, Sendable {
        /// Ask the service manager to start the unit (then feed `startAnswered`).
        case start
        /// Watch the started unit until it ends (then feed `unitEnded`).
        case watch
        /// Journal `record` (it changed).
        case journal
    }

    /// A session's machine as the journal left it: a start that was due stays due (at once if its time passed
    /// while the daemon was down); whatever ran before the restart is not watched any more.
    init(record: SessionLaunchRecord? = nil) {
        var r = record ?? SessionLaunchRecord()
        if r.lastResult == "starting" || r.lastResult == "running" || r.lastResult == Self.waitingForAgent {
            r.lastResult = "unknown"
        }
        self.record = r
        phase = r.nextAttemptAt != nil ? .backoff : .idle
    }

    /// The backoff before the next start after `failures` failures in a row: 10 s, 20 s, 40 s, … up to 1 h.
    static func delay(failures: Int) -> Double {
        guard failures > 0 else { return 0 }
        let doublings = min(failures - 1, 20)
        return min(longestDelay, firstDelay * Double(1 << doublings))
    }

    mutating func handle(_ input: Input, now: Double) -> [Action] {
        switch (phase, input) {
        case (.idle, .unattended):
            return start(now: now)
        case (_, .unattended):
            return [] // started already, or waiting for its time

        case (.starting, .startAnswered(nil)):
            phase = .running
            record.lastResult = "running"
            record.lastMessage = nil
            return [.journal, .watch]
        case (.starting, .startAnswered(let error?)):
            return failed(result: "startFailed", message: error, now: now)
        case (_, .startAnswered):
            return []

        case let (.running, .unitEnded(result, status, pending, subscribed)):
            let message = result.isEmpty || result == "success"
                ? (status == 0 ? nil : "exit status \(status)")
                : "result \(result), exit status \(status)"
            let unitFailed = !result.isEmpty && result != "success"
            guard pending else {
                phase = .idle
                record.lastResult = unitFailed ? "failed" : "acknowledged"
                record.lastMessage = message
                return [.journal]
            }
            let outcome = unitFailed ? "failed" : "exitedWithoutAcknowledging"
            if subscribed {
                // Another client is attached: it gets the events; nothing starts while it is there.
                phase = .idle
                record.lastResult = outcome
                record.lastMessage = message
                return [.journal]
            }
            if acknowledgedSinceStart && !unitFailed {
                // It did its work; what is pending came meanwhile.
                record.lastResult = "acknowledged"
                record.lastMessage = message
                phase = .idle
                return [.journal] + start(now: now)
            }
            return failed(result: outcome, message: message, now: now)
        case (_, .unitEnded):
            return []

        case (.waitingForAgent, .acknowledged(all: true)):
            // The client came by itself: nothing is left to start it for.
            acknowledgedSinceStart = true
            phase = .idle
            record.failures = 0
            record.lastResult = "acknowledged"
            record.lastMessage = nil
            return [.journal]
        case (_, .acknowledged(let all)):
            acknowledgedSinceStart = true
            guard all else { return [] }
            var changed = record.failures != 0
            record.failures = 0
            if phase == .backoff {
                phase = .idle
                record.nextAttemptAt = nil
                changed = true
            }
            return changed ? [.journal] : []

        case let (.backoff, .due(pending, subscribed)):
            guard let at = record.nextAttemptAt, now >= at else { return [] }
            record.nextAttemptAt = nil
            phase = .idle
            guard pending, !subscribed else { return [.journal] }
            return start(now: now)
        case (_, .due):
            return []

        case (.starting, .agentMissing):
            return waitForAgent()
        case (_, .agentMissing):
            return []
        case (.waitingForAgent, .agentAvailable(let pending)):
            guard pending else {
                phase = .idle
                record.lastResult = "acknowledged"
                record.lastMessage = nil
                return [.journal]
            }
            return start(now: now)
        case (_, .agentAvailable):
            return []
        case (.starting, .agentLost):
            // Gone before it answered (an agent that dies on every launch must not loop without a pause).
            return failed(result: "startFailed", message: "the user's agent left before it answered", now: now)
        case (.running, .agentLost):
            return waitForAgent() // the unit may still run: the next agent watches it
        case (_, .agentLost):
            return []
        }
    }

    private mutating func waitForAgent() -> [Action] {
        phase = .waitingForAgent
        record.lastResult = Self.waitingForAgent
        record.lastMessage = "waiting for the user's agent (halftunesctl agent) to connect"
        return [.journal]
    }

    private mutating func start(now: Double) -> [Action] {
        phase = .starting
        acknowledgedSinceStart = false
        record.lastLaunchAt = now
        record.lastResult = "starting"
        record.lastMessage = nil
        record.nextAttemptAt = nil
        return [.journal, .start]
    }

    private mutating func failed(result: String, message: String?, now: Double) -> [Action] {
        record.failures += 1
        record.lastResult = result
        record.lastMessage = message
        record.nextAttemptAt = now + Self.delay(failures: record.failures)
        phase = .backoff
        return [.journal]
    }
}
