import ArgumentParser
import HalfTunesKit

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List tasks.")

    @OptionGroup var options: GlobalOptions
    @Option(help: "Only tasks of this session.") var session: String?
    @Option(help: "Only tasks in this state (\(TaskState.allCases.map(\.rawValue).joined(separator: ", "))).")
    var state: TaskState?

    func run() throws {
        let tasks = try options.client().tasks(session: session, state: state)
        if options.json { return try Console.json(TaskListResult(tasks: tasks)) }
        if tasks.isEmpty { return Console.out("No tasks.") }
        var table = Table("ID", "STATE", "PROGRESS", "SIZE", "SESSION", "DESTINATION")
        for task in tasks {
            let (progress, size, target) = TaskText.listColumns(task)
            table.add(String(task.id), TaskText.shortState(task), progress, size, task.session, target)
        }
        Console.out(table.render())
    }
}
