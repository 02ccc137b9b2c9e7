// What the agent does with each launch request, start answer and unit end: a value type, tested without a bus.

/// The units the agent started and watches, and which of the daemon's requests each report answers.
///
/// The daemon keeps every decision (when to start, backoff, "until acknowledged"); this only makes sure a unit
/// is started once however often it is asked for, and that reports go to the registration that asked:
/// - a unit already starting or running is not started again when asked (by a second session that names the same
///   unit, or by the daemon again after a reconnection): the request joins it, and is answered `started` at once
///   when the unit already runs (`StartUnit` is sent again: a no-op while it is active, a new run if it was just
///   stopping);
/// - after a reconnection (`connected`) nothing asked on the old connection is reported on the new one: the daemon
///   put those launches back to waiting when the old connection went, and asks again for what is still due; a unit
///   still running then is only watched, and one that ended meanwhile is started again only if asked again.
public struct AgentLaunches: Sendable {
    public enum Event: Equatable, Sendable {
        /// A registration on a new connection (requests of earlier connections are no longer answered).
        case connected
        /// `agent.launch {session, unit}`.
        case asked(session: String, unit: String)
        /// The service manager's answer to starting `unit` (nil: started).
        case startAnswered(unit: String, error: String?)
        /// The unit ended (inactive or failed, no job pending).
        case ended(unit: String, result: String, exitStatus: Int32)
    }

    public enum Action: Equatable, Sendable {
        /// `StartUnit(unit, "replace")`, answered by `startAnswered`.
        case start(unit: String)
        /// Poll the unit until it ended, answered by `ended`.
        case watch(unit: String)
        case reportStarted(session: String, unit: String, error: String?)
        case reportEnded(session: String, unit: String, result: String, exitStatus: Int32)
    }

    struct Unit: Equatable, Sendable {
        var running: Bool
        /// The sessions whose requests (on the current connection) wait for this unit's reports, in order.
        var askedBy: [String]
    }

    private(set) var units: [String: Unit] = [:]

    public init() {}

    /// The units starting or running.
    public var activeUnits: [String] { units.keys.sorted() }

    public mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case .connected:
            for unit in units.keys { units[unit]?.askedBy = [] }
            return []
        case let .asked(session, unit):
            guard var known = units[unit] else {
                units[unit] = Unit(running: false, askedBy: [session])
                return [.start(unit: unit)]
            }
            guard !known.askedBy.contains(session) else { return [] }
            known.askedBy.append(session)
            units[unit] = known
            // A running unit is started again too: nothing happens while it is active, and one that is stopping
            // right now (its end not seen yet) runs again, which the watch then follows (the answer is ignored).
            return known.running ? [.start(unit: unit), .reportStarted(session: session, unit: unit, error: nil)] : []
        case let .startAnswered(unit, error):
            guard var known = units[unit], !known.running else { return [] }
            let reports = known.askedBy.map { Action.reportStarted(session: $0, unit: unit, error: error) }
            if error != nil {
                units[unit] = nil
                return reports
            }
            known.running = true
            units[unit] = known
            return [.watch(unit: unit)] + reports
        case let .ended(unit, result, exitStatus):
            guard let known = units.removeValue(forKey: unit) else { return [] }
            return known.askedBy.map { .reportEnded(session: $0, unit: unit, result: result, exitStatus: exitStatus) }
        }
    }
}
