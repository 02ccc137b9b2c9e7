import ArgumentParser
import HalfTunesKit

struct Pause: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause", abstract: "Pause (suspend) a task; its bytes are kept.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The task id.") var id: Int64

    func run() throws {
        let task = try options.client().suspend(id)
        if options.json { return try Console.json(task) }
        Console.out("Task \(task.id) paused at \(TaskText.progress(task)); `halftunesctl resume \(task.id)` to continue")
    }
}
