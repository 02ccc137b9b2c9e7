// `halftunes pause|resume|cancel <n>`: the tutorial's pauseDownload, resumeDownload and cancelDownload.
import ArgumentParser
import Foundation
import HalfTunesKit

struct Pause: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Pause a track's download, keeping what it received.")
    @OptionGroup var options: AppOptions
    @Argument(help: "The track number.") var number: Int

    func run() throws {
        var state = try options.loadState()
        let track = try state.track(number)
        guard let id = state.downloads[track.previewURL]?.taskID else {
            throw ValidationErrorText("\(number). \(track.name) is not downloading")
        }
        let session = try options.downloads()
        let task = try session.task(withIdentifier: id)
        // `cancel(byProducingResumeData:)`: the partial data is kept for `downloadTask(withResumeData:)`.
        guard let data = try task.cancel(byProducingResumeData: true) else {
            throw ValidationErrorText("\(number). \(track.name) cannot be paused: it is \(task.state.rawValue)")
        }
        state.downloads[track.previewURL] = DownloadRecord(taskID: nil, resumeData: data)
        try state.save(to: options.stateDirectory)
        Console.out("\(number). \(track.name): paused at \(TrackStatus.progress(task.info)).")
    }
}

struct Resume: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Resume a paused download where it stopped.")
    @OptionGroup var options: AppOptions
    @Argument(help: "The track number.") var number: Int

    func run() throws {
        var state = try options.loadState()
        let track = try state.track(number)
        guard let data = state.downloads[track.previewURL]?.resumeData else {
            throw ValidationErrorText("\(number). \(track.name) is not paused")
        }
        let session = try options.downloads()
        let task = try session.downloadTask(withResumeData: data, destination: track.fileName)
        try task.resume()
        state.downloads[track.previewURL] = DownloadRecord(taskID: task.taskIdentifier)
        try state.save(to: options.stateDirectory)
        Console.out("\(number). \(track.name): resumed (task \(task.taskIdentifier)).")
    }
}

struct Cancel: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Cancel a track's download and forget it.")
    @OptionGroup var options: AppOptions
    @Argument(help: "The track number.") var number: Int

    func run() throws {
        var state = try options.loadState()
        let track = try state.track(number)
        guard let record = state.downloads[track.previewURL] else {
            throw ValidationErrorText("\(number). \(track.name) is not downloading")
        }
        let session = try options.downloads()
        if let id = record.taskID {
            let task = try session.task(withIdentifier: id)
            if task.state == .completed {
                throw ValidationErrorText("\(number). \(track.name) is downloaded already (\(task.info.location ?? "in the library")); "
                    + "delete the file to remove it")
            }
            if !task.state.isTerminal { try task.cancel() }
        } else if let data = record.resumeData {
            // A paused preview: its resume data holds partial data in the daemon; use it up to discard it.
            try session.downloadTask(withResumeData: data).cancel()
        }
        state.downloads[track.previewURL] = nil
        try state.save(to: options.stateDirectory)
        Console.out("\(number). \(track.name): canceled.")
    }
}
