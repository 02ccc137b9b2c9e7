import ArgumentParser
import HalfTunesKit

struct Sessions: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sessions", abstract: "List background sessions.")

    @OptionGroup var options: GlobalOptions

    func run() throws {
        let sessions = try options.client().sessions()
        if options.json { return try Console.json(SessionListResult(sessions: sessions)) }
        if sessions.isEmpty { return Console.out("No sessions.") }
        var table = Table("SESSION", "STATE", "TASKS", "LAST EVENT", "ACKED", "DIRECTORY")
        for session in sessions {
            let counts = TaskState.allCases.compactMap { state in
                session.taskCounts[state.rawValue].map { "\($0) \(state.rawValue)" }
            }
            table.add(session.identifier, session.state.rawValue, counts.isEmpty ? "none" : counts.joined(separator: ", "),
                      "#\(session.lastEventSeq)", "#\(session.ackedThrough)",
                      session.configuration.destinationDirectory ?? "(daemon default)")
        }
        Console.out(table.render())
    }
}
