// `halftunes search <term>`: a data task to the iTunes Search API, then a numbered table of the results.
import ArgumentParser
import Foundation
import HalfTunesKit

struct Search: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Search the iTunes catalogue for songs.")

    @OptionGroup var options: AppOptions
    @Argument(help: "What to search for.") var term: [String]

    func run() throws {
        let text = term.joined(separator: " ")
        guard !text.isEmpty else { throw ValidationError("give a search term") }
        var components = URLComponents(string: options.apiBase + "/search")
        components?.queryItems = [URLQueryItem(name: "media", value: "music"), URLQueryItem(name: "entity", value: "song"),
                                  URLQueryItem(name: "term", value: text)]
        guard let url = components?.url?.absoluteString else { throw ValidationError("bad API base URL '\(options.apiBase)'") }
        let body = try Self.fetch(url, options: options)
        let tracks = try SearchResults.parse(body)
        var state = try options.loadState()
        state.term = text
        state.tracks = tracks
        try state.save(to: options.stateDirectory)
        let downloads = try options.downloads()
        let tasks = try TrackStatus.tasks(of: downloads)
        if tracks.isEmpty { return Console.out("No songs found for '\(text)'.") }
        for (i, track) in tracks.enumerated() {
            let status = TrackStatus.text(state.downloads[track.previewURL], tasks: tasks)
            Console.out(String(format: "%3d  %@ — %@", i + 1, track.name, track.artist) + (status.isEmpty ? "" : "  [\(status)]"))
        }
    }

    /// The tutorial's `dataTask(with:completionHandler:)`: a data task in a session of its own (the tutorial's
    /// default session), run to its end.
    static func fetch(_ url: String, options: AppOptions) throws -> [UInt8] {
        let session = try BackgroundSession.open(identifier: options.session + ".search", socketPath: options.socketPath)
        let body: [UInt8], response: TaskResponse
        do {
            (body, response) = try session.data(from: url, description: "iTunes search")
        } catch let error as TaskError {
            throw ValidationErrorText("the search failed: \(error.message)" + (error.httpStatus.map { " (HTTP \($0))" } ?? ""))
        }
        guard response.status == 200 else { throw ValidationErrorText("the search failed: HTTP \(response.status)") }
        return body
    }
}

/// The iTunes Search API's answer: `results[]` with `trackName`, `artistName` and `previewUrl`.
enum SearchResults {
    private struct Answer: Decodable {
        struct Result: Decodable {
            var trackName: String?
            var artistName: String?
            var previewUrl: String?
        }
        var results: [Result]
    }

    /// The results that have a preview, in order.
    static func parse(_ body: [UInt8]) throws -> [Track] {
        let answer: Answer
        do {
            answer = try JSONDecoder().decode(Answer.self, from: Data(body))
        } catch {
            throw ValidationErrorText("the search answer is not iTunes Search API JSON (\(error))")
        }
        return answer.results.compactMap { r in
            guard let preview = r.previewUrl, let name = r.trackName else { return nil }
            return Track(name: name, artist: r.artistName ?? "Unknown Artist", previewURL: preview)
        }
    }
}
