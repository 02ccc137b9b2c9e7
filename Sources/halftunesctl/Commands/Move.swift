import ArgumentParser
import HalfTunesKit

struct Move: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "move", abstract: "Move a task to the front or back of the queue, within its priority.",
        discussion: "Queued tasks start by priority (high, then normal, then low), first come first served within "
            + "one priority. --to-front puts the task before every other task of its priority, --to-back after "
            + "them; to move it past another priority, change its priority with `halftunesctl set ID --priority`. "
            + "A paused or waiting task takes that place when it is queued again.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The task id.") var id: Int64
    @Flag(name: .customLong("to-front"), help: "Before every queued task of the same priority.") var toFront = false
    @Flag(name: .customLong("to-back"), help: "After every queued task of the same priority.") var toBack = false

    func validate() throws {
        if toFront == toBack { throw ValidationError("give exactly one of --to-front and --to-back") }
    }

    func run() throws {
        let task = try options.client().move(id, to: toFront ? .front : .back)
        if options.json { return try Console.json(task) }
        Console.out("Task \(task.id) (\(task.priority.rawValue) priority): \(TaskText.explanation(task))")
    }
}
