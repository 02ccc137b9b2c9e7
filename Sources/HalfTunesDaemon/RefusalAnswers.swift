// How the state's refusals of a new task or session are answered on the wire (code and message).
import HalfTunesProtocol

extension RPCError {
    /// A request the daemon no longer takes: it is stopping.
    static var daemonShuttingDown: RPCError { RPCError(.shuttingDown, "halftunesd is shutting down") }

    /// The answer to a task.create the state did not admit.
    init(_ refusal: DaemonState.CreateRefusal) {
        switch refusal {
        case .shuttingDown:
            self = .daemonShuttingDown
        case .sessionInvalidated(let session):
            self.init(.sessionInvalidated, "Session '\(session)' is being invalidated and accepts no new tasks")
        case let .sessionTasks(session, held, max):
            self.init(.limitExceeded, "Session '\(session)' already has \(held) unfinished tasks (at most \(max)); wait for some to finish or cancel them")
        case let .ownerTasks(uid, held, max):
            self.init(.limitExceeded, "uid \(uid) already has \(held) unfinished tasks across its sessions (at most \(max)); wait for some to finish or cancel them")
        case let .sessionEvents(session, held, max):
            self.init(.limitExceeded, "Session '\(session)' has \(held) unacknowledged events (at most \(max)); acknowledge delivered events with events.ack to create more tasks")
        case let .ownerEvents(uid, held, max):
            self.init(.limitExceeded, "uid \(uid) has \(held) unacknowledged events across its sessions (at most \(max)); acknowledge delivered events with events.ack to create more tasks")
        case let .diskFull(uid, held, limit):
            self.init(.limitExceeded, "uid \(uid)'s unfinished downloads and kept resume data already hold \(held) "
                + "bytes on disk, all that max-disk-per-uid allows (\(limit) bytes); let some finish, or cancel some "
                + "(resume data keeps its bytes until redeemed or expired)")
        }
    }

    /// The answer to a task.cancel asking for resume data that the state refused.
    init(_ refusal: DaemonState.ResumeDataRefusal) {
        self.init(.limitExceeded, "uid \(refusal.owner) already keeps \(refusal.kept) partial files as resume data, the most "
            + "allowed (max-resume-data-per-uid \(refusal.max)); the task was not canceled. Resume some (task.create "
            + "with resumeData) or cancel without resume data; resume data also expires after 7 days")
    }

    /// The answer to a session.open the state refused.
    init(_ refusal: DaemonState.SessionRefusal) {
        switch refusal {
        case .invalidating(let id):
            self.init(.sessionInvalidated, "Session '\(id)' is being invalidated; its identifier can be reused once its tasks end")
        case let .tooMany(uid, held, max):
            self.init(.limitExceeded, "uid \(uid) already has \(held) sessions (at most \(max)); "
                + "invalidate sessions you no longer use (halftunesctl session invalidate ID)")
        }
    }
}
