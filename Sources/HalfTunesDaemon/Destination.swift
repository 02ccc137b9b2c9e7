import Foundation
import HalfTunesCore
import HalfTunesEngine
import HalfTunesProtocol

/// Where a download goes: validation of URLs and destination paths, default names, partial paths.
enum Destination {
    /// Accepts only absolute http(s) URLs with a host.
    static func validate(url string: String) throws(RPCError) -> URL {
        guard let url = URL(string: string), let scheme = url.scheme?.lowercased() else {
            throw RPCError.invalidParams("'\(string)' is not a valid URL")
        }
        guard scheme == "http" || scheme == "https" else {
            throw RPCError.invalidParams("URL scheme '\(scheme)' is not supported; use http or https")
        }
        guard let host = url.host, !host.isEmpty else {
            throw RPCError.invalidParams("URL '\(string)' has no host")
        }
        return url
    }

    /// The longest path a client may give, in bytes (PATH_MAX less the C string's NUL).
    static let maxPathBytes = 4095

    /// Refuses a path a client gave (`field`: where it was given) that holds NUL or another control character
    /// (C0, DEL, C1), a `/` with a combining mark after it, or is longer than `maxPathBytes`. A NUL would end the path where the kernel reads it, so the
    /// daemon would act on another path than the one it checked and journaled.
    static func checkClientPath(_ path: String, field: String) throws(RPCError) {
        if let bad = path.unicodeScalars.first(where: { $0.properties.generalCategory == .control }) {
            let code = "U+" + String(bad.value, radix: 16, uppercase: true).leftPadded(to: 4)
            throw RPCError.invalidParams("\(field) holds a control character (\(code)); paths may not contain NUL, "
                + "newlines or other control characters")
        }
        guard path.utf8.count <= maxPathBytes else {
            throw RPCError.invalidParams("\(field) is longer than \(maxPathBytes) bytes")
        }
        // Swift splits strings into characters: a `/` followed by a combining mark (U+0334 …) is one character
        // that is not "/", while the kernel splits at every `/` byte. Such a path would be checked as other
        // components than the kernel uses (found by the `names` fuzzer).
        if path.utf8.lazy.filter({ $0 == UInt8(ascii: "/") }).count != path.lazy.filter({ $0 == "/" }).count {
            throw RPCError.invalidParams("\(field) has a '/' followed by a combining character; paths may not")
        }
    }

    /// The file name a URL suggests: its last path component, percent-decoded and made safe like every name a
    /// server chooses (`ContentDisposition.sanitize`: no separators, control or bidi characters, leading dots);
    /// the host's name plus `.download` when nothing is left.
    static func suggestedName(for url: URL) -> String {
        let component = url.lastPathComponent == "/" ? "" : url.lastPathComponent
        let decoded = component.removingPercentEncoding ?? component
        return ContentDisposition.sanitize(decoded) ?? ContentDisposition.sanitize((url.host ?? "") + ".download") ?? "download"
    }

    /// Resolves the destination of a new task. An explicit destination must not exist; a default one is
    /// renamed "name (1).ext" when taken. `reserved` holds destinations of live tasks. With `overwrite`, an
    /// existing file (not a directory) at an explicit destination is allowed: it is replaced when the download
    /// completes. A name the URL (or later the server) chooses is always made free: `overwrite` without an
    /// explicit destination is refused, so that no server picks which of the user's files is replaced.
    static func resolve(explicit: String?, url: URL, directory: String, reserved: Set<String>,
                        overwrite: Bool = false) throws(RPCError) -> String {
        try resolve(explicit: explicit, url: url, directory: directory, isReserved: reserved.contains, overwrite: overwrite)
    }

    /// `resolve(explicit:url:directory:reserved:overwrite:)` with the reserved destinations as a test.
    static func resolve(explicit: String?, url: URL, directory: String, isReserved: (String) -> Bool,
                        overwrite: Bool = false) throws(RPCError) -> String {
        if let explicit, !explicit.isEmpty {
            let path = normalize(explicit.hasPrefix("/") ? explicit : directory + "/" + explicit)
            let parent = (path as NSString).deletingLastPathComponent
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: parent, isDirectory: &isDir), isDir.boolValue else {
                throw RPCError(.ioError, "The destination directory \(parent) does not exist")
            }
            if path.hasSuffix("/") || FileManager.default.fileExists(atPath: path, isDirectory: &isDir) && isDir.boolValue {
                throw RPCError.invalidParams("The destination \(path) is a directory; name a file")
            }
            if !overwrite, FileManager.default.fileExists(atPath: path) || isDanglingLink(path) {
                throw RPCError(.destinationConflict, "The destination \(path) already exists; it is not overwritten unless "
                    + "the request says so (overwrite: true, halftunesctl download --overwrite)",
                               data: .object(["destination": .string(path)]))
            }
            if isReserved(path) {
                throw RPCError(.destinationConflict, "Another task already downloads to \(path)",
                               data: .object(["destination": .string(path)]))
            }
            return path
        }
        if overwrite {
            throw RPCError.invalidParams("overwrite needs an explicit destination: a name taken from the URL or the "
                + "server is always made free, never replaces a file (halftunesctl download --destination PATH --overwrite)")
        }
        try ensureDirectory(directory)
        let candidate = normalize(directory + "/" + suggestedName(for: url))
        guard let free = FilePublisher.availableName(for: candidate, isReserved: isReserved) else {
            throw RPCError(.destinationConflict, "No free name was found near \(candidate); move or remove some of the "
                + "files named like it, or give a destination", data: .object(["destination": .string(candidate)]))
        }
        return free
    }

    /// The hidden partial file next to the destination, unique per task.
    static func partialPath(for destination: String) -> String {
        let dir = (destination as NSString).deletingLastPathComponent
        let name = (destination as NSString).lastPathComponent
        return dir + "/." + name + "." + String(ResumeData.newToken().prefix(8)) + ".partial"
    }

    static func ensureDirectory(_ directory: String) throws(RPCError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw RPCError(.ioError, "Cannot create the download directory \(directory): \(error.localizedDescription)")
        }
    }

    /// `.` and `..` taken out, split at `/` bytes as the kernel reads the path (`PathBytes`).
    static func normalize(_ path: String) -> String {
        var parts: [String] = []
        for part in PathBytes.components(path) {
            if part == "." { continue }
            if part == ".." { _ = parts.popLast(); continue }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }

    private static func isDanglingLink(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }
}

private extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
