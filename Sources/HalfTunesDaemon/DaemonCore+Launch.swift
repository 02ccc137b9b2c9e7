// Relaunching a session's client: its launchUnit is started while its events wait with nobody subscribed.
import Foundation
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    /// The unit started for the session (a template's instance filled in), or nil without a `launchUnit`.
    func launchUnit(of identifier: String) -> String? {
        guard let unit = state.sessions[identifier]?.record.configuration.launchUnit else { return nil }
        return UnitName.resolve(unit, session: SessionNames.name(of: identifier))
    }

    /// Whether events of the session wait unacknowledged.
    func hasPendingEvents(_ identifier: String) -> Bool {
        guard let s = state.sessions[identifier] else { return false }
        return s.lastEventSeq > s.record.ackedThrough
    }

    func isSubscribed(_ identifier: String) -> Bool { subscribers[identifier]?.isEmpty == false }

    /// Events of the session wait and nobody is subscribed: its unit is started (unless it runs already, or
    /// a start is due later). O(1): sessions without a `launchUnit` return at once.
    func launchIfUnattended(_ identifier: String) {
        guard launchUnit(of: identifier) != nil, !isSubscribed(identifier), hasPendingEvents(identifier) else { return }
        feedLaunch(identifier, .unattended)
    }

    /// Feeds the session's `LaunchMachine` and carries out what it says.
    func feedLaunch(_ identifier: String, _ input: LaunchMachine.Input) {
        guard let unit = launchUnit(of: identifier), let s = state.sessions[identifier] else { return }
        var machine = launches[identifier] ?? LaunchMachine(record: s.record.launch)
        let actions = machine.handle(input, now: clock())
        launches[identifier] = machine
        for action in actions {
            switch action {
            case .journal:
                feedAndRun(.sessionLaunchRecorded(identifier, machine.record))
                do {
                    try journal.setSessionLaunch(identifier, machine.record)
                } catch {
                    logger.error("journal write failed: \(error)", metadata: ["session": "\(identifier)"])
                }
            case .start:
                logger.notice("starting the session's launch unit: its events wait and no client is subscribed",
                              metadata: ["session": "\(identifier)", "unit": "\(unit)",
                                         "failures": "\(machine.record.failures)"])
                launcher.start(unit) { [weak self] error in
                    Task { await self?.launchStartAnswered(identifier, unit: unit, error: error) }
                }
            case .watch:
                launcher.watch(unit) { [weak self] result, status in
                    Task { await self?.launchUnitEnded(identifier, unit: unit, result: result, exitStatus: status) }
                }
            }
        }
    }

    func launchStartAnswered(_ identifier: String, unit: String, error: String?) {
        guard launchUnit(of: identifier) == unit else { return } // reconfigured meanwhile
        if let error {
            logger.warning("the session's launch unit could not be started", metadata: [
                "session": "\(identifier)", "unit": "\(unit)", "error": "\(error)"])
        }
        feedLaunch(identifier, .startAnswered(error: error))
    }

    func launchUnitEnded(_ identifier: String, unit: String, result: String, exitStatus: Int32) {
        guard launchUnit(of: identifier) == unit else { return }
        let pending = hasPendingEvents(identifier)
        logger.notice("the session's launch unit ended", metadata: [
            "session": "\(identifier)", "unit": "\(unit)", "result": "\(result)", "exitStatus": "\(exitStatus)",
            "eventsAcknowledged": "\(!pending)"])
        feedLaunch(identifier, .unitEnded(result: result, exitStatus: exitStatus, pending: pending,
                                          subscribed: isSubscribed(identifier)))
        if let m = launches[identifier], m.phase == .backoff, let at = m.record.nextAttemptAt {
            logger.notice("the session's launch unit is started again later", metadata: [
                "session": "\(identifier)", "unit": "\(unit)", "at": "\(Timestamp.format(at))"])
        }
    }

    /// Once a second: starts that are due (O(sessions with a launch unit backing off)).
    func launchesDue() {
        let now = clock()
        for (identifier, machine) in launches where machine.phase == .backoff {
            guard let at = machine.record.nextAttemptAt, at <= now else { continue }
            feedLaunch(identifier, .due(pending: hasPendingEvents(identifier), subscribed: isSubscribed(identifier)))
        }
    }

    /// The session's launch unit changed (`session.open`): a removed one is forgotten, a new one may start at once.
    func launchUnitConfigured(_ identifier: String, before: String?) {
        let now = state.sessions[identifier]?.record.configuration.launchUnit
        guard now != before else { return }
        launches[identifier] = nil
        if state.sessions[identifier]?.record.launch != nil {
            feedAndRun(.sessionLaunchRecorded(identifier, nil))
            try? journal.setSessionLaunch(identifier, nil)
        }
        launchIfUnattended(identifier)
    }

    /// What `SessionInfo.launch` shows.
    func launchInfo(_ s: ManagedSession) -> SessionLaunch? {
        guard let unit = launchUnit(of: s.record.identifier) else { return nil }
        let r = launches[s.record.identifier]?.record ?? s.record.launch ?? SessionLaunchRecord()
        return SessionLaunch(unit: unit, lastLaunchAt: r.lastLaunchAt.map(Timestamp.format), lastResult: r.lastResult,
                             lastMessage: r.lastMessage, nextAttemptAt: r.nextAttemptAt.map(Timestamp.format),
                             failures: r.failures)
    }
}
