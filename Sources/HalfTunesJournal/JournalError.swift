/// Errors of the journal itself (SQLite failures surface as GRDB's `DatabaseError`).
public enum JournalError: Error, Equatable, CustomStringConvertible {
    /// The journal file could not be created or opened (`errno` text in `reason`).
    case cannotOpen(path: String, reason: String)
    /// The file was written by a newer halftunesd (it has migrations this build does not know).
    case newerSchema(path: String, unknownMigrations: [String])
    /// The journal was closed.
    case closed
    /// An fsync of the journal failed: commits since the last successful one may not be on disk, and the
    /// journal accepts no more writes (restart the daemon once the disk is healthy).
    case syncFailed(reason: String)
    case unknownSession(String)
    case unknownTask(Int64)
    /// `insertTask` got a task that already has an id.
    case taskAlreadyHasID(Int64)
    /// `updateTask` got a task without an id.
    case taskHasNoID
    /// An event of a live-only type (didWriteData, didFinishEvents, didBecomeInvalid) was passed in.
    case notJournaled(type: String)
    /// An event passed to `insertTask`/`updateTask` belongs to another session than the task.
    case eventSessionMismatch(task: String, event: String)
    /// A stored value could not be read back (unknown enum value, bad JSON).
    case corruptRow(table: String, key: String, detail: String)
    /// An event reached the database without the `seq` its writer numbers it with (a bug).
    case eventNotNumbered
    /// Every task id up to Int64.max was handed out (only a journal edited by hand gets there).
    case tasksExhausted

    public var description: String {
        switch self {
        case let .cannotOpen(path, reason):
            return "Cannot open the journal at \(path): \(reason)"
        case let .newerSchema(path, unknown):
            return "The journal at \(path) was written by a newer halftunesd (unknown migrations: "
                + "\(unknown.joined(separator: ", "))); refusing to open it"
        case .closed:
            return "The journal is closed"
        case let .syncFailed(reason):
            return "The journal could not be made durable (\(reason)); it accepts no more writes until halftunesd restarts"
        case let .unknownSession(id):
            return "The journal has no session with identifier '\(id)'"
        case let .unknownTask(id):
            return "The journal has no task with id \(id)"
        case let .taskAlreadyHasID(id):
            return "insertTask expects a new task without an id, got id \(id)"
        case .taskHasNoID:
            return "updateTask needs a task with an id (insert it first)"
        case let .notJournaled(type):
            return "Events of type '\(type)' are live only and cannot be journaled"
        case let .eventSessionMismatch(task, event):
            return "An event of session '\(event)' cannot be journaled with a task of session '\(task)'"
        case .tasksExhausted:
            return "The journal has handed out every task id up to \(Int64.max); it takes no new tasks"
        case .eventNotNumbered:
            return "an event was written without a seq (events are numbered when their write is submitted)"
        case let .corruptRow(table, key, detail):
            return "Unreadable row \(key) in journal table \(table): \(detail)"
        }
    }
}
