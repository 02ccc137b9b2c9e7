// Half Tunes: the URLSession tutorial's music-preview app, on HalfTunesKit and halftunesd.
import ArgumentParser
import Foundation
import HalfTunesKit

@main
struct HalfTunes: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "halftunes",
        abstract: "Search the iTunes catalogue and download 30-second song previews in the background.",
        discussion: """
            Searches run as data tasks and previews download in a background session of halftunesd, so the app \
            can quit at any moment: downloads go on, and the next start (or `halftunes events`, which the daemon \
            can start for you) picks up what finished. See docs/tutorial.md.
            """,
        subcommands: [Search.self, Download.self, Pause.self, Resume.self, Cancel.self, Library.self, Play.self,
                      Events.self])
}

/// Options every command takes: where the daemon, the iTunes API, the library and the app's state are.
struct AppOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The daemon's socket (default: $HALFTUNES_SOCKET, else the daemon's default).",
                               valueName: "path"))
    var socket: String?
    @Option(help: "The background session of the downloads.")
    var session = "com.example.halftunes"
    @Option(help: ArgumentHelp("The iTunes Search API's base URL (default: $HALFTUNES_API, else https://itunes.apple.com).",
                               valueName: "url"))
    var api: String?
    @Option(help: ArgumentHelp("Where previews are kept (default: $XDG_MUSIC_DIR/HalfTunes, else ~/Music/HalfTunes).",
                               valueName: "dir"))
    var library: String?

    var environment: [String: String] { ProcessInfo.processInfo.environment }
    var socketPath: String { socket ?? DefaultSocket.path() }
    var apiBase: String { api ?? environment["HALFTUNES_API"].flatMap { $0.isEmpty ? nil : $0 } ?? "https://itunes.apple.com" }
    var libraryDirectory: String {
        if let library { return Paths.absolute(library) }
        if let music = environment["XDG_MUSIC_DIR"], !music.isEmpty { return music + "/HalfTunes" }
        return Paths.home + "/Music/HalfTunes"
    }
    /// `$XDG_STATE_HOME/halftunes`, else `~/.local/state/halftunes`.
    var stateDirectory: String {
        if let state = environment["XDG_STATE_HOME"], !state.isEmpty { return state + "/halftunes" }
        return Paths.home + "/.local/state/halftunes"
    }

    /// The app's background session, re-attached (or created, with the library as its directory).
    func downloads() throws -> BackgroundSession {
        try FileManager.default.createDirectory(atPath: libraryDirectory, withIntermediateDirectories: true)
        let session = try BackgroundSession.open(identifier: session, socketPath: socketPath)
        if session.info.configuration.destinationDirectory != libraryDirectory {
            var configuration = session.info.configuration
            configuration.destinationDirectory = libraryDirectory
            return try BackgroundSession.open(identifier: self.session, configuration: configuration, socketPath: socketPath)
        }
        return session
    }

    func loadState() throws -> AppState { try AppState.load(from: stateDirectory) }
}

enum Paths {
    static var home: String { ProcessInfo.processInfo.environment["HOME"] ?? NSHomeDirectory() }
    static func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    }
}

/// Output helpers.
enum Console {
    static func out(_ line: String) { print(line) }
    static func error(_ line: String) { FileHandle.standardError.write(Data((line + "\n").utf8)) }
}
