// `halftunes events`: what runs when the daemon starts the app for its session's events (the tutorial's
// `application(_:handleEventsForBackgroundURLSession:completionHandler:)`).
import ArgumentParser
import Foundation
import HalfTunesKit

struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Handle the downloads that finished while the app was not running, then exit.",
        discussion: "Re-attaches to the background session, records each finished preview in the library, prints "
            + "a line per track, and acknowledges the events (each is handled once). halftunesd can start it for "
            + "you: `halftunesctl session open com.example.halftunes --launch-unit halftunes-events@.service`.")
    @OptionGroup var options: AppOptions

    func run() throws {
        var state = try options.loadState()
        let handler = Handler(state: state)
        _ = try options.downloads() // the library as the session's directory
        let n = try BackgroundSession.handleEvents(forSession: options.session, delegate: handler,
                                                   socketPath: options.socketPath)
        state = handler.state
        try state.save(to: options.stateDirectory)
        if handler.lines.isEmpty { Console.out("Nothing new (\(n) event\(n == 1 ? "" : "s")).") }
        for line in handler.lines { Console.out(line) }
    }

    /// The tutorial's `urlSession(_:downloadTask:didFinishDownloadingTo:)` and `didCompleteWithError`.
    final class Handler: BackgroundSessionDelegate, @unchecked Sendable {
        var state: AppState
        var lines: [String] = []
        init(state: AppState) { self.state = state }

        /// The track a task downloads (nil: not one of this app's downloads, e.g. from another program).
        func track(of task: Int64) -> Track? {
            guard let url = state.downloads.first(where: { $0.value.taskID == task })?.key else { return nil }
            return state.tracks.first { $0.previewURL == url } ?? Track(name: url, artist: "", previewURL: url)
        }

        func session(_ s: BackgroundSession, task: Int64, didFinishDownloadingTo location: String) {
            guard let track = track(of: task) else { return }
            state.downloads[track.previewURL]?.file = location
            lines.append("Downloaded: \(track.name) — \(track.artist) → \(location)")
        }

        func session(_ s: BackgroundSession, task: Int64, didCompleteWithError error: TaskError?) {
            guard let error, error.code != TaskErrorCode.canceled, let track = track(of: task) else { return }
            lines.append("Failed: \(track.name) — \(track.artist): \(error.message)")
        }
    }
}
