import ArgumentParser
import HalfTunesKit

struct SessionInvalidate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "invalidate", abstract: "End a session: let its tasks finish (or cancel them), then delete it.",
        discussion: "Without --cancel, queued, running and waiting tasks run to their end and suspended ones are "
            + "canceled (finishTasksAndInvalidate). With --cancel every unfinished task is canceled at once "
            + "(invalidateAndCancel). The session then disappears with its tasks, events and resume data.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The session identifier.") var identifier: String
    @Flag(help: "Cancel every unfinished task now.") var cancel = false

    func run() throws {
        let result = try options.client().invalidateSession(identifier, cancelTasks: cancel)
        if options.json { return try Console.json(result) }
        Console.out(result.invalidated
            ? "Session \(identifier) is gone."
            : "Session \(identifier) is invalidating; it ends when its \(result.remainingTasks) remaining task\(result.remainingTasks == 1 ? "" : "s") end.")
    }
}
