// Desktop notifications of finished tasks as the state decides them: which finished task is told, what it says, and to whom.
import HalfTunesJournal
import HalfTunesProtocol

extension DaemonState {
    /// Who is told of a finished task.
    enum NoticeRecipient: Equatable, Sendable {
        /// The daemon's own user, who has no agent: the daemon posts it on its session bus.
        case daemonsOwnUser
        /// Another user: `agent.notify` to that user's agent (kept for it while none is connected).
        case agent(uid: UInt32)
    }

    /// `actions` with a `notify` right after every `journal` of a task that finished (its `didComplete`) in a
    /// session whose `notifications` cover it. O(actions).
    func withNotices(_ actions: [Action], now: Double) -> [Action] {
        guard actions.contains(where: Self.isCompletionRow) else { return actions }
        var result: [Action] = []
        result.reserveCapacity(actions.count + 1)
        for action in actions {
            result.append(action)
            guard case let .journal(record, _) = action, Self.isCompletionRow(action),
                  let s = sessions[record.session],
                  let notice = AgentNotices.notice(for: record, configuration: s.record.configuration,
                                                   sessionName: SessionNames.name(of: record.session),
                                                   presented: SessionNames.presented(record.session, to: s.record.uid),
                                                   now: now)
            else { continue }
            result.append(.notify(notice, to: s.record.uid == daemonUID ? .daemonsOwnUser : .agent(uid: s.record.uid)))
        }
        return result
    }

    private static func isCompletionRow(_ action: Action) -> Bool {
        guard case let .journal(record, payloads) = action, record.state.isTerminal else { return false }
        return payloads.contains(where: \.isDidComplete)
    }
}
