import ArgumentParser
import HalfTunesAgent
import HalfTunesKit

struct Agent: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Start this user's launch units for the system halftunesd (run by halftunesd-agent.service).",
        discussion: """
            Connects to the system daemon's socket (\(DefaultSocket.systemPath) unless --socket names another) as \
            this user, registers as the user's agent, and starts the units the daemon asks for (a session's \
            launchUnit, when its events wait with no client) in this user's own service manager, reporting how \
            each ended. Reconnects when the daemon restarts. Runs until another agent of this user registers \
            (exit 0) or the daemon will not have it (exit 77).
            """)

    @OptionGroup var options: GlobalOptions

    func run() throws {
        let agent = UserAgent(socketPath: options.socket ?? DefaultSocket.systemPath) { Console.note($0) }
        switch agent.run() {
        case .replaced:
            return
        case .refused(let why):
            Console.error(why)
            throw ExitCode(ExitStatus.notPermitted)
        }
    }
}
