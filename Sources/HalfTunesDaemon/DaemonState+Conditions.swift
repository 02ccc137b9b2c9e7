// The network and power conditions as an input of the core's state: sessions whose gate changed are re-checked.
import HalfTunesCore
import HalfTunesProtocol

extension DaemonState {
    /// The conditions changed: every session whose `ConditionsGate` verdict changed has its tasks in memory
    /// re-checked (O(sessions) plus O(tasks of those sessions); a session the change does not concern costs one
    /// comparison). Running transfers of a blocked session stop; its queued tasks wait; tasks waiting for the
    /// conditions of a session now allowed are queued again at their old places.
    mutating func conditionsChanged(_ new: SystemConditions, limits: SlotLimits, now: Double, into actions: inout [Action]) {
        let old = conditions
        reportedConditions = new
        guard !shuttingDown, old != new else { return }
        // Sessions and tasks in a fixed order here and below: the same inputs give the same actions (InputLog).
        for (identifier, s) in sessions.sorted(by: { $0.key < $1.key }) {
            let c = s.record.configuration
            if ConditionsGate.block(c, under: old) != ConditionsGate.block(c, under: new) {
                regate(session: identifier, now: now, into: &actions)
            }
        }
        grantSlots(limits, now: now, into: &actions)
    }

    /// Re-checks every task of the session in memory against the conditions (its configuration changed, or
    /// what the conditions mean for it).
    mutating func regate(session identifier: String, now: Double, into actions: inout [Action]) {
        for id in tasks.ids(session: identifier).sorted() { regate(id, now: now, into: &actions) }
    }

    /// Holds a queued or running task, or releases one waiting for the conditions, as its session's gate says
    /// now. A task waiting for its begin date, or whose transfer is over (verifying, publishing), is left alone.
    mutating func regate(_ id: Int64, now: Double, into actions: inout [Action]) {
        guard !shuttingDown, let t = tasks[id], !t.completing, t.deferredUntil == nil,
              let s = sessions[t.record.session] else { return }
        let state = t.machine.state
        guard state == .queued || state == .running || t.machine.isWaitingForConditions else { return }
        if let block = ConditionsGate.block(s.record.configuration, under: conditions) {
            _ = try? apply(.conditionsBlock(block.reason, waits: block.waits), to: id, now: now, into: &actions)
        } else if t.machine.isWaitingForConditions {
            _ = try? apply(.conditionsAllow, to: id, now: now, into: &actions)
        }
    }

    /// Whether the session's tasks may transfer under the current conditions.
    func mayTransfer(session identifier: String) -> Bool {
        guard let s = sessions[identifier] else { return true }
        return ConditionsGate.block(s.record.configuration, under: conditions) == nil
    }
}
