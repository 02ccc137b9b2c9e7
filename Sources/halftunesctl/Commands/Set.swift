import ArgumentParser
import HalfTunesKit

struct SetTask: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set", abstract: "Change a task's priority or bandwidth limit (it keeps running).",
        discussion: "Rates are bytes per second with an optional k, M or G suffix in powers of 1024 (like curl): "
            + "512k = 524288 B/s, 2M = 2097152 B/s. --limit-rate 0 (or none) removes the task's own limit; the "
            + "daemon-wide limit (`halftunesctl limits`) still applies.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The task id.") var id: Int64
    @Option(help: ArgumentHelp("high, normal or low: queued tasks start by priority.", valueName: "priority"))
    var priority: TaskPriority?
    @Option(name: .customLong("limit-rate"), help: ArgumentHelp("This task's bandwidth limit.", valueName: "rate"))
    var limitRate: String?

    func validate() throws {
        if priority == nil && limitRate == nil { throw ValidationError("give --priority and/or --limit-rate") }
        if let limitRate { _ = try ControlArguments.rate(limitRate, option: "--limit-rate") }
    }

    func run() throws {
        let rate = try limitRate.map { try ControlArguments.rate($0, option: "--limit-rate") }
        let task = try options.client().update(id, priority: priority, bandwidthLimit: rate)
        if options.json { return try Console.json(task) }
        Console.out("Task \(task.id): \(task.priority.rawValue) priority, bandwidth limit "
            + "\(ByteRate.format(task.bandwidthLimit ?? 0)); \(TaskText.explanation(task))")
    }
}
