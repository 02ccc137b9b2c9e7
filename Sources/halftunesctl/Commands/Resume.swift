import ArgumentParser
import HalfTunesKit

struct Resume: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume", abstract: "Start or continue a suspended task.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The task id.") var id: Int64

    func run() throws {
        let task = try options.client().resume(id)
        if options.json { return try Console.json(task) }
        Console.out("Task \(task.id) resumed: \(TaskText.explanation(task))")
    }
}
