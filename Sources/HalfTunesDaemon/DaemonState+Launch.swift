// Relaunching a session's client as inputs of the core's state: its `LaunchMachine`, fed by events, subscribers and time.
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonState {
    /// The unit started for the session (a template's instance filled in), or nil without a `launchUnit`.
    func launchUnit(of identifier: String) -> String? {
        guard let unit = sessions[identifier]?.record.configuration.launchUnit else { return nil }
        return UnitName.resolve(unit, session: SessionNames.name(of: identifier))
    }

    /// Whether events of the session wait unacknowledged.
    func hasPendingEvents(_ identifier: String) -> Bool {
        guard let s = sessions[identifier] else { return false }
        return s.lastEventSeq > s.record.ackedThrough
    }

    func isSubscribed(_ identifier: String) -> Bool { (sessions[identifier]?.subscribers ?? 0) > 0 }

    /// Events of the session wait and nobody is subscribed: its unit is started (unless it runs already, or a
    /// start is due later). O(1): sessions without a `launchUnit` return at once.
    mutating func launchIfUnattended(_ identifier: String, now: Double, into actions: inout [Action]) {
        guard launchUnit(of: identifier) != nil, !isSubscribed(identifier), hasPendingEvents(identifier) else { return }
        if launches[identifier]?.phase == .waitingForAgent, let owner = sessions[identifier]?.record.uid,
           agents.contains(owner) {
            // Its agent came while a client was subscribed; that client left with events unacknowledged.
            return feedLaunch(identifier, .agentAvailable(pending: true), now: now, into: &actions)
        }
        feedLaunch(identifier, .unattended, now: now, into: &actions)
    }

    /// Feeds the session's `LaunchMachine`; what it changes is kept in the session's record (and journaled).
    mutating func feedLaunch(_ identifier: String, _ input: LaunchMachine.Input, now: Double, into actions: inout [Action]) {
        guard let unit = launchUnit(of: identifier), let s = sessions[identifier] else { return }
        var machine = launches[identifier] ?? LaunchMachine(record: s.record.launch)
        let steps = machine.handle(input, now: now)
        launches[identifier] = machine
        let owner = s.record.uid
        for step in steps {
            switch step {
            case .journal:
                sessions[identifier]?.record.launch = machine.record
                actions.append(.recordLaunch(session: identifier, machine.record))
            case .start where owner == daemonUID:
                actions.append(.startUnit(session: identifier, unit: unit, failures: machine.record.failures))
            case .start where agents.contains(owner):
                actions.append(.askAgent(uid: owner, session: identifier, unit: unit))
            case .start:
                feedLaunch(identifier, .agentMissing, now: now, into: &actions) // waits for the user's agent
            case .watch where owner == daemonUID:
                actions.append(.watchUnit(session: identifier, unit: unit))
            case .watch:
                break // the agent watches the unit it started, and reports its end
            }
        }
    }

    /// An agent of `uid` connected: that user's launches waiting for one start (O(the uid's sessions)).
    /// (The daemon's own uid has no agent: its units start in the daemon's own manager.) A launch whose events
    /// wait while a client is subscribed stays waiting: the client's leaving starts it (`launchIfUnattended`).
    mutating func agentRegistered(_ uid: UInt32, now: Double, into actions: inout [Action]) {
        guard uid != daemonUID else { return }
        agents.insert(uid)
        for identifier in sessions.identifiers(of: uid).sorted() where launches[identifier]?.phase == .waitingForAgent {
            let pending = hasPendingEvents(identifier)
            guard !pending || !isSubscribed(identifier) else { continue }
            feedLaunch(identifier, .agentAvailable(pending: pending), now: now, into: &actions)
        }
    }

    /// The agent of `uid` left: the launches it was starting or watching wait for the next one.
    mutating func agentLeft(_ uid: UInt32, now: Double, into actions: inout [Action]) {
        guard uid != daemonUID else { return }
        agents.remove(uid)
        for identifier in sessions.identifiers(of: uid).sorted() {
            guard let phase = launches[identifier]?.phase, phase == .starting || phase == .running else { continue }
            feedLaunch(identifier, .agentLost, now: now, into: &actions)
        }
    }

    /// Once a second: starts that are due (a look at each session with a launch machine; only those backing off
    /// or starting are sorted, usually none).
    mutating func launchesDue(now: Double, into actions: inout [Action]) {
        // In a fixed order here and below: the same inputs give the same actions (InputLog).
        let waiting = launches.filter { $0.value.phase == .backoff || $0.value.phase == .starting }
        for (identifier, machine) in waiting.sorted(by: { $0.key < $1.key }) {
            switch machine.phase {
            case .backoff:
                guard let at = machine.record.nextAttemptAt, at <= now else { continue }
                feedLaunch(identifier, .due(pending: hasPendingEvents(identifier), subscribed: isSubscribed(identifier)),
                           now: now, into: &actions)
            case .starting where sessions[identifier]?.record.uid != daemonUID:
                // An agent that does not answer a start in time: a failed start (the daemon's own manager is
                // always answered, or given up on, by the launcher).
                guard let asked = machine.record.lastLaunchAt, now - asked >= Self.agentAnswerTimeout else { continue }
                feedLaunch(identifier, .startAnswered(error: "the user's agent did not answer within "
                    + "\(Int(Self.agentAnswerTimeout)) s"), now: now, into: &actions)
            default:
                continue
            }
        }
    }

    /// How long an agent may take to answer `agent.launch` with `agent.started`.
    static let agentAnswerTimeout = 60.0

    /// The session's launch unit changed: a removed or replaced one is forgotten (with its journaled record), a
    /// new one may start at once.
    mutating func launchUnitChanged(_ identifier: String, now: Double, into actions: inout [Action]) {
        launches[identifier] = nil
        if sessions[identifier]?.record.launch != nil {
            sessions[identifier]?.record.launch = nil
            actions.append(.recordLaunch(session: identifier, nil))
        }
        launchIfUnattended(identifier, now: now, into: &actions)
    }

    /// `launchRecordWriteFailed`: the session's launch record is written again after the wait a task row's rewrite
    /// has (1 s, doubling with each failure in a row up to 60 s). Without it the journal would keep an older record,
    /// and the next start would back off from it: fewer failures counted, a start due sooner than the one the log
    /// announced. Not for a session the state no longer has (its record went with its row).
    mutating func launchRecordWriteFailed(_ identifier: String, now: Double) {
        guard sessions[identifier] != nil else { return }
        launchRewrites[identifier] = RewriteSchedule(failedAfter: launchRewrites[identifier], now: now)
    }

    /// From `clockTick` (and, all of them, when shutdown's grace ends): the records due are written again, as the
    /// session has it now (a record written meanwhile is only written once more). One whose failure did not come
    /// back within its wait counts as written. O(records to write again), only while there are some.
    mutating func launchRewritesDue(now: Double, all: Bool = false, into actions: inout [Action]) {
        guard !launchRewrites.isEmpty else { return }
        for (identifier, rewrite) in RewriteSchedule.due(launchRewrites, now: now, all: all) {
            guard let s = sessions[identifier], all || !rewrite.written else {
                launchRewrites[identifier] = nil // written, or gone
                continue
            }
            actions.append(.recordLaunch(session: identifier, s.record.launch))
            launchRewrites[identifier]?.rewritten(now: now)
        }
    }

    /// After recovery: every session with a launch unit gets its machine (a start that was due stays due), and
    /// those whose events wait are started — except those being deleted (`deleting`: their invalidation ends now).
    mutating func restoreLaunches(now: Double, skipping deleting: Set<String>, into actions: inout [Action]) {
        for (identifier, s) in sessions.sorted(by: { $0.key < $1.key })
        where s.record.configuration.launchUnit != nil && !deleting.contains(identifier) {
            launches[identifier] = LaunchMachine(record: s.record.launch)
            launchIfUnattended(identifier, now: now, into: &actions)
        }
    }
}
