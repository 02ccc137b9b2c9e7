#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import ArgumentParser

/// Turning `download`'s command-line values into request fields.
enum DownloadArguments {
    /// `Name: value` lines to a header dictionary; repeated names are joined with ", ".
    static func headers(_ lines: [String]) throws -> [String: String]? {
        guard !lines.isEmpty else { return nil }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else {
                throw ValidationError("--header '\(line)' must look like 'Name: value'")
            }
            let name = String(line[..<colon]).trimmingSpaces
            let value = String(line[line.index(after: colon)...]).trimmingSpaces
            guard !name.isEmpty, !name.contains(where: { $0 == " " || $0 == "\t" }) else {
                throw ValidationError("--header '\(line)' has no valid header name")
            }
            headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        }
        return headers
    }

    /// An absolute destination: relative paths are taken from the current directory, and an existing
    /// directory (or a path ending in "/") gets the URL's last path component as file name.
    static func destination(_ path: String?, url: String?) throws -> String? {
        guard let path, !path.isEmpty else { return nil }
        var absolute = path
        if !path.hasPrefix("/") {
            guard let cwd = getcwd(nil, 0) else { throw ValidationError("cannot read the current directory") }
            defer { free(cwd) }
            absolute = String(cString: cwd) + "/" + path
        }
        if let url, absolute.hasSuffix("/") || isDirectory(absolute) {
            if !absolute.hasSuffix("/") { absolute += "/" }
            absolute += fileName(from: url)
        }
        return absolute
    }

    /// The last path component of a URL, without query or fragment ("download" when there is none).
    static func fileName(from url: String) -> String {
        var rest = Substring(url)
        if let scheme = rest.firstRange(of: "://") { rest = rest[scheme.upperBound...] }
        if let end = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<end] }
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count > 1, let last = parts.last, !last.isEmpty, last != ".", last != ".." else { return "download" }
        return String(last)
    }

    private static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }
}

extension String {
    var trimmingSpaces: String {
        var text = Substring(self)
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return String(text)
    }
}
