// The writer's hot statements run with their arguments bound as they are, without GRDB's per-call check.
import GRDB

extension Statement {
    /// `execute(arguments:)` for a statement whose arguments are built for it, one value per parameter in order
    /// (every caller passes a literal list or `TaskRecord.arguments()` with its id, for SQL written beside it).
    /// GRDB's `execute(arguments:)` checks the values against the statement's parameters on every call and, under
    /// 21 parameters, binds each through a nested generic closure (`withBindings`): together ~4 % of the daemon's
    /// samples under control-plane load, for statements whose shape never changes. Here the values are bound
    /// directly (SQLite copies strings) and the statement runs as `execute()` runs it; a count that does not
    /// match the parameters is a programming error, caught in debug builds. The values are let go after a run that
    /// succeeded (as `execute(arguments:)` does): the cached statement does not keep, say, an event's JSON until its
    /// next use.
    func executeBound(_ arguments: StatementArguments) throws {
        assert((try? validateArguments(arguments)) != nil, "executeBound: arguments that do not fit \(sql)")
        setUncheckedArguments(arguments)
        try execute()
        // Only after a run that succeeded: `setUncheckedArguments` resets the statement, and a reset after a
        // failed step reports that failure (GRDB traps on it). A statement that failed leaves GRDB's cache anyway.
        setUncheckedArguments([])
    }
}
