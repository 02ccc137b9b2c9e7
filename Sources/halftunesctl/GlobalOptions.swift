import ArgumentParser
import HalfTunesKit

/// Options every subcommand accepts (before or after the subcommand name).
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The daemon's control socket.", valueName: "path"))
    var socket: String?

    @Flag(name: .long, help: "Print JSON objects, one per line, instead of text.")
    var json = false

    var socketPath: String { socket ?? DefaultSocket.path() }

    /// A connected client; calls give up after 30 s without an answer.
    func client() throws -> HalfTunesClient {
        try HalfTunesClient(socketPath: socketPath, callTimeout: 30)
    }
}

extension TaskState: ExpressibleByArgument {}
extension SessionNotifications: ExpressibleByArgument {}
