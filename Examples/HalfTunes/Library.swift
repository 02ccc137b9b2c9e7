// `halftunes library` and `halftunes play <n>`: the downloaded previews, and handing one to a player.
import ArgumentParser
import Foundation
import HalfTunesKit

struct Library: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the last search's tracks that are downloaded or downloading, and where the files are.")
    @OptionGroup var options: AppOptions

    func run() throws {
        let state = try options.loadState()
        let session = try options.downloads()
        let tasks = try TrackStatus.tasks(of: session)
        var shown = 0
        for (i, track) in state.tracks.enumerated() {
            let record = state.downloads[track.previewURL]
            let status = TrackStatus.text(record, tasks: tasks)
            guard !status.isEmpty else { continue }
            shown += 1
            let file = status == "downloaded" ? TrackStatus.file(record, tasks: tasks).map { "  \($0)" } ?? "" : ""
            Console.out(String(format: "%3d  %@ — %@  [%@]%@", i + 1, track.name, track.artist, status, file))
        }
        if shown == 0 { Console.out("Nothing downloaded yet (library: \(options.libraryDirectory)).") }
    }
}

struct Play: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Play a downloaded preview with $HALFTUNES_PLAYER, else xdg-open.")
    @OptionGroup var options: AppOptions
    @Argument(help: "The track number.") var number: Int

    func run() throws {
        let state = try options.loadState()
        let track = try state.track(number)
        let tasks = try TrackStatus.tasks(of: try options.downloads())
        guard let file = TrackStatus.file(state.downloads[track.previewURL], tasks: tasks),
              FileManager.default.fileExists(atPath: file) else {
            throw ValidationErrorText("\(number). \(track.name) is not downloaded: `halftunes download \(number)` first")
        }
        let player = options.environment["HALFTUNES_PLAYER"].flatMap { $0.isEmpty ? nil : $0 } ?? "xdg-open"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [player, file]
        do {
            try process.run()
        } catch {
            throw ValidationErrorText("cannot start \(player): \(error)")
        }
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ValidationErrorText("\(player) exited with status \(process.terminationStatus)")
        }
        Console.out("Playing \(track.name) — \(track.artist).")
    }
}
