import ArgumentParser
import HalfTunesKit

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Show live progress of running, queued and waiting tasks.",
        discussion: "Redraws about 4 times a second on a terminal; otherwise prints a line per changed task "
            + "every second (a JSON TaskInfo per line with --json). Exits when no task is pending unless --follow.")

    @OptionGroup var options: GlobalOptions
    @Option(help: "Only tasks of this session.") var session: String?
    @Flag(help: "Keep watching when no task is pending.") var follow = false

    func run() throws {
        let client = try options.client()
        var board = WatchBoard(json: options.json, redraw: Console.stdoutIsTTY && !options.json)
        while true {
            let tasks = try client.tasks(session: session)
            board.update(tasks, now: monotonicSeconds())
            if !follow && !tasks.contains(where: { $0.state.isPending }) {
                board.finish()
                return
            }
            sleepSeconds(board.redraw ? 0.25 : 1)
        }
    }
}
