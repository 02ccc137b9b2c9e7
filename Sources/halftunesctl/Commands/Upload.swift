import ArgumentParser
import HalfTunesKit

struct Upload: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upload",
        abstract: "Upload a file in the background (PUT by default, or POST).",
        discussion: "Prints the task id and returns at once; with --wait, follows the task until it completes and "
            + "prints the response status and the beginning of its body. Transient failures retry the upload from "
            + "its first byte. The daemon reads the file itself: it must stay in place, unchanged, until the upload ends.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The file to send (relative to the current directory).") var file: String
    @Argument(help: "The URL to send it to.") var url: String
    @Option(help: ArgumentHelp("PUT (default) or POST.", valueName: "method")) var method: String?
    @Option(help: "The session to create the task in.") var session = "halftunesctl"
    @Option(name: .customLong("header"), help: ArgumentHelp("An HTTP header; repeatable (e.g. 'Content-Type: image/png').",
                                                              valueName: "Name: value"))
    var headerLines: [String] = []
    @Option(help: "A label for the task.") var description: String?
    @Option(help: ArgumentHelp("high, normal (default) or low: queued tasks start by priority.", valueName: "priority"))
    var priority: TaskPriority?
    @Option(name: .customLong("limit-rate"), help: ArgumentHelp(
        "This task's bandwidth limit: bytes per second, k/M/G suffixes in powers of 1024 (e.g. 512k, 2M).",
        valueName: "rate"))
    var limitRate: String?
    @Flag(help: "Follow the task until it completes (exit 0 done, 1 failed, 4 canceled).") var wait = false

    func validate() throws {
        if let method, !["PUT", "POST"].contains(method.uppercased()) {
            throw ValidationError("--method must be PUT or POST (got '\(method)')")
        }
        _ = try DownloadArguments.headers(headerLines)
        if let limitRate { _ = try ControlArguments.rate(limitRate, option: "--limit-rate") }
    }

    func run() throws {
        let client = try options.client()
        let opened = try client.openSession(session)
        // Subscribe before creating, so no event of the new task can be missed.
        let events = wait ? try client.events(session: session, after: opened.session.lastEventSeq) : nil
        let task = try client.createUpload(
            session: session, url: url, file: try ExchangeArguments.absolutePath(file), method: method?.uppercased(),
            headers: try DownloadArguments.headers(headerLines), description: description, start: true,
            priority: priority, bandwidthLimit: try limitRate.map { try ControlArguments.rate($0, option: "--limit-rate") })
        if options.json { try Console.json(task) } else { Console.out(TaskText.headline(task)) }
        guard let events else { return }
        var follower = TaskFollower(task: task, json: options.json)
        let status = try follower.follow(events)
        if !options.json, let response = follower.response, let preview = TaskText.bodyPreview(response) {
            Console.out(preview)
        }
        if status != ExitStatus.ok { throw ExitCode(status) }
    }
}
