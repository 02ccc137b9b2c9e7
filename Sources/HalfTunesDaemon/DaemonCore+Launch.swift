// Relaunching a session's client: the runner's side (start and watch the unit, journal the record); the state decides.
import Foundation
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonCore {
    /// `startUnit`: asks the service manager; its answer comes back as `launchStartAnswered`.
    func startUnit(_ identifier: String, unit: String, failures: Int) {
        logger.notice("starting the session's launch unit: its events wait and no client is subscribed",
                      metadata: ["session": "\(identifier)", "unit": "\(unit)", "failures": "\(failures)"])
        launcher.start(unit) { [weak self] error in
            Task { await self?.launchStartAnswered(identifier, unit: unit, error: error) }
        }
    }

    /// `watchUnit`: its end comes back as `launchUnitEnded`.
    func watchUnit(_ identifier: String, unit: String) {
        launcher.watch(unit) { [weak self] result, status in
            Task { await self?.launchUnitEnded(identifier, unit: unit, result: result, exitStatus: status) }
        }
    }

    /// `recordLaunch`: the session's launch record, journaled.
    func recordLaunch(_ identifier: String, _ record: SessionLaunchRecord?) {
        do {
            try journal.setSessionLaunch(identifier, record)
        } catch {
            logger.error("journal write failed: \(error)", metadata: ["session": "\(identifier)"])
        }
    }

    private func launchStartAnswered(_ identifier: String, unit: String, error: String?) {
        if let error {
            logger.warning("the session's launch unit could not be started", metadata: [
                "session": "\(identifier)", "unit": "\(unit)", "error": "\(error)"])
        }
        feedAndRun(.launchStartAnswered(identifier, unit: unit, error: error))
    }

    private func launchUnitEnded(_ identifier: String, unit: String, result: String, exitStatus: Int32) {
        logger.notice("the session's launch unit ended", metadata: [
            "session": "\(identifier)", "unit": "\(unit)", "result": "\(result)", "exitStatus": "\(exitStatus)",
            "eventsAcknowledged": "\(!state.hasPendingEvents(identifier))"])
        feedAndRun(.launchUnitEnded(identifier, unit: unit, result: result, exitStatus: exitStatus))
        if let m = state.launches[identifier], m.phase == .backoff, let at = m.record.nextAttemptAt {
            logger.notice("the session's launch unit is started again later", metadata: [
                "session": "\(identifier)", "unit": "\(unit)", "at": "\(Timestamp.format(at))"])
        }
    }

    /// The runner's subscribers of the session changed: the state counts them (none left may start its unit).
    func subscribersChanged(_ identifier: String) {
        feedAndRun(.subscribersChanged(identifier, count: subscribers[identifier]?.count ?? 0))
    }

    /// What `SessionInfo.launch` shows.
    func launchInfo(_ s: ManagedSession) -> SessionLaunch? {
        guard let unit = state.launchUnit(of: s.record.identifier) else { return nil }
        let r = state.launches[s.record.identifier]?.record ?? s.record.launch ?? SessionLaunchRecord()
        return SessionLaunch(unit: unit, lastLaunchAt: r.lastLaunchAt.map(Timestamp.format), lastResult: r.lastResult,
                             lastMessage: r.lastMessage, nextAttemptAt: r.nextAttemptAt.map(Timestamp.format),
                             failures: r.failures)
    }
}
