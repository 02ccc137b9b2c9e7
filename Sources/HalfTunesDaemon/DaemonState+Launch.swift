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
        feedLaunch(identifier, .unattended, now: now, into: &actions)
    }

    /// Feeds the session's `LaunchMachine`; what it changes is kept in the session's record (and journaled).
    mutating func feedLaunch(_ identifier: String, _ input: LaunchMachine.Input, now: Double, into actions: inout [Action]) {
        guard let unit = launchUnit(of: identifier), let s = sessions[identifier] else { return }
        var machine = launches[identifier] ?? LaunchMachine(record: s.record.launch)
        let steps = machine.handle(input, now: now)
        launches[identifier] = machine
        for step in steps {
            switch step {
            case .journal:
                sessions[identifier]?.record.launch = machine.record
                actions.append(.recordLaunch(session: identifier, machine.record))
            case .start:
                actions.append(.startUnit(session: identifier, unit: unit, failures: machine.record.failures))
            case .watch:
                actions.append(.watchUnit(session: identifier, unit: unit))
            }
        }
    }

    /// Once a second: starts that are due (O(sessions with a launch machine)).
    mutating func launchesDue(now: Double, into actions: inout [Action]) {
        // In a fixed order here and below: the same inputs give the same actions (InputLog).
        for (identifier, machine) in launches.sorted(by: { $0.key < $1.key }) where machine.phase == .backoff {
            guard let at = machine.record.nextAttemptAt, at <= now else { continue }
            feedLaunch(identifier, .due(pending: hasPendingEvents(identifier), subscribed: isSubscribed(identifier)),
                       now: now, into: &actions)
        }
    }

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
