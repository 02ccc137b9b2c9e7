// What the app remembers between runs: the last search and which task downloads which track.
import Foundation
import HalfTunesKit

/// One search result, like the tutorial's `Track`.
struct Track: Codable, Equatable {
    var name: String
    var artist: String
    var previewURL: String

    /// The preview's file name in the library: "Artist - Track.m4a" (no `/`, no control characters).
    var fileName: String {
        let ext = URL(string: previewURL).map { ($0.path as NSString).pathExtension } ?? ""
        let base = "\(artist) - \(name)".map { $0 == "/" || $0.isNewline || ($0.asciiValue.map { $0 < 0x20 } ?? false) ? "_" : $0 }
        let trimmed = String(String(base).prefix(150)).trimmingCharacters(in: CharacterSet(charactersIn: ". "))
        return (trimmed.isEmpty ? "preview" : trimmed) + (ext.isEmpty ? "" : "." + ext)
    }
}

/// One track's download, like the tutorial's `Download`: the task doing it, or the resume data it was paused
/// with (`cancel(byProducingResumeData:)`).
struct DownloadRecord: Codable, Equatable {
    var taskID: Int64?
    var resumeData: String?
    /// Where the finished preview is (set once its completion was handled).
    var file: String?
}

/// `$XDG_STATE_HOME/halftunes/state.json`, written whole and renamed into place.
struct AppState: Codable {
    var term: String?
    var tracks: [Track] = []
    /// By preview URL.
    var downloads: [String: DownloadRecord] = [:]

    static func path(in directory: String) -> String { directory + "/state.json" }

    static func load(from directory: String) throws -> AppState {
        let path = path(in: directory)
        guard let data = FileManager.default.contents(atPath: path) else { return AppState() }
        do {
            return try JSONDecoder().decode(AppState.self, from: data)
        } catch {
            throw ValidationErrorText("\(path) is not Half Tunes state (\(error)); remove it to start afresh")
        }
    }

    func save(to directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = try encoder.encode(self)
        let path = Self.path(in: directory), temporary = path + ".partial"
        guard FileManager.default.createFile(atPath: temporary, contents: data) else {
            throw ValidationErrorText("cannot write \(temporary)")
        }
        let fd = open(temporary, O_RDONLY)
        if fd >= 0 { fsync(fd); close(fd) }
        guard rename(temporary, path) == 0 else { throw ValidationErrorText("cannot rename \(temporary) to \(path)") }
    }

    /// The track numbered `n` in the last search (1-based).
    func track(_ n: Int) throws -> Track {
        guard n >= 1, n <= tracks.count else {
            throw ValidationErrorText(tracks.isEmpty ? "no search yet: run `halftunes search <term>` first"
                                                     : "no track \(n): the last search has \(tracks.count)")
        }
        return tracks[n - 1]
    }
}

struct ValidationErrorText: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
