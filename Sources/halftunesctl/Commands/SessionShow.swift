import ArgumentParser
import HalfTunesKit

struct SessionShow: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "Show a session's configuration, task counts and events.")

    @OptionGroup var options: GlobalOptions
    @Argument(help: "The session identifier.") var identifier: String

    func run() throws {
        let session = try options.client().session(identifier)
        if options.json { return try Console.json(session) }
        Console.out("Session \(session.identifier) (\(session.state.rawValue)), created \(session.createdAt)")
        SessionText.print(session)
    }
}
