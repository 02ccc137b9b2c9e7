// `halftunes download <n…>`: download tasks for previews, with the tutorial's progress lines.
import ArgumentParser
import Foundation
import HalfTunesKit

struct Download: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Download the previews of tracks of the last search.",
        discussion: "Follows them with a progress line per track until they finish; with --no-wait it returns at "
            + "once and the downloads go on in the daemon (the next `halftunes` run shows how far they got).")

    @OptionGroup var options: AppOptions
    @Argument(help: "Track numbers from the last search.") var numbers: [Int]
    @Flag(help: "Start the downloads and return.") var noWait = false

    func run() throws {
        var state = try options.loadState()
        let tracks = try numbers.map { ($0, try state.track($0)) }
        let session = try options.downloads()
        let tasks = try TrackStatus.tasks(of: session)
        // Subscribe before creating, so no event of the new tasks is missed.
        let events = noWait ? nil : try session.events(after: session.info.lastEventSeq)
        defer { events?.close() }
        var started: [Int64: (Int, Track)] = [:]
        for (n, track) in tracks {
            let record = state.downloads[track.previewURL]
            let status = TrackStatus.text(record, tasks: tasks)
            if status == "downloaded" || TrackStatus.isActive(record, tasks: tasks) {
                Console.out("\(n). \(track.name) is already \(status == "downloaded" ? "downloaded" : "downloading (\(status))").")
                continue
            }
            if status == "paused" {
                Console.out("\(n). \(track.name) is paused: `halftunes resume \(n)` continues it.")
                continue
            }
            // The tutorial's `startDownload(_:)`: a download task, resumed.
            let task = try session.downloadTask(with: track.previewURL, destination: track.fileName,
                                                description: "\(track.artist) — \(track.name)")
            try task.resume()
            state.downloads[track.previewURL] = DownloadRecord(taskID: task.taskIdentifier)
            started[task.taskIdentifier] = (n, track)
            Console.out("\(n). \(track.name) — \(track.artist): downloading (task \(task.taskIdentifier)).")
        }
        try state.save(to: options.stateDirectory)
        guard let events, !started.isEmpty else { return }
        try follow(events, started: started, session: session, state: &state)
    }

    /// The tutorial's `urlSession(_:downloadTask:didWriteData:…)` and `didFinishDownloadingTo`: a progress line
    /// per track each tenth of the way, and the finished file recorded; returns when all have completed.
    private func follow(_ events: EventStream, started: [Int64: (Int, Track)], session: BackgroundSession,
                        state: inout AppState) throws {
        var remaining = Set(started.keys)
        var lastTenth: [Int64: Int] = [:]
        var failures = 0
        while !remaining.isEmpty, let event = try events.nextEvent() {
            guard let id = event.task, let (n, track) = started[id] else { continue }
            switch event.payload {
            case let .didWriteData(_, total, expected):
                guard let expected, expected > 0 else { continue }
                let tenth = Int(Double(total) / Double(expected) * 10)
                if tenth != lastTenth[id] {
                    lastTenth[id] = tenth
                    Console.out("\(n). \(TrackStatus.progress(received: total, expected: expected))  \(track.name)")
                }
            case .didFinishDownloading(let location):
                state.downloads[track.previewURL]?.file = location
                Console.out("\(n). \(track.name) — \(track.artist): downloaded to \(location)")
            case .didComplete(let error, _):
                remaining.remove(id)
                if let error {
                    failures += 1
                    Console.error("\(n). \(track.name): \(error.message)")
                }
            default:
                break
            }
            // Handled here, so `halftunes events` does not handle it again.
            if let seq = event.seq { _ = try? session.client.ack(session: session.identifier, through: seq) }
        }
        try state.save(to: options.stateDirectory)
        if failures > 0 { throw ExitCode(1) }
    }
}
