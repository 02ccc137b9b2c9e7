// A user's ~/.netrc: the credentials curl (--netrc), wget and ftp find there, by host name.
import Foundation
import HalfTunesProtocol

/// The `machine NAME login USER password PASS` entries of a netrc file, and its `default`. Tokens are separated by
/// blanks and newlines, may be double-quoted (with `\"` and `\\`, as curl reads them); `account` is skipped, and a
/// `macdef` runs to the next empty line. The first entry for a host wins (as in curl and ftp); `default` answers
/// every other host. Host names compare case-insensitively.
public struct Netrc: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        /// nil: the `default` entry.
        public var machine: String?
        public var login: String?
        public var password: String?
    }

    public private(set) var entries: [Entry] = []

    public init(entries: [Entry] = []) {
        self.entries = entries
    }

    /// The credentials for `host`: its own entry's (or `default`'s) login and password. An entry without a login
    /// gives none (curl then asks for nothing either).
    public func credentials(for host: String) -> Credentials? {
        let lowered = host.lowercased()
        let entry = entries.first { $0.machine?.lowercased() == lowered } ?? entries.first { $0.machine == nil }
        guard let entry, let login = entry.login else { return nil }
        return Credentials(user: login, password: entry.password ?? "")
    }

    /// Parses a netrc file's text. Unknown words are skipped, as curl does.
    public static func parse(_ text: String) -> Netrc {
        var tokens = Tokenizer(text)
        var entries: [Entry] = []
        var current: Entry?
        func close() { if let c = current { entries.append(c) }; current = nil }
        while let token = tokens.next() {
            switch token {
            case "machine":
                close()
                guard let name = tokens.next() else { break }
                current = Entry(machine: name)
            case "default":
                close()
                current = Entry(machine: nil)
            case "login":
                let value = tokens.next()
                if current != nil { current!.login = value }
            case "password":
                let value = tokens.next()
                if current != nil { current!.password = value }
            case "account":
                _ = tokens.next()
            case "macdef":
                close()
                tokens.skipMacro()
            default:
                continue
            }
        }
        close()
        return Netrc(entries: entries)
    }

    /// The file curl reads: `$NETRC`, else `$HOME/.netrc`.
    public static func defaultPath(environment: [String: String]) -> String? {
        if let path = environment["NETRC"], !path.isEmpty { return path }
        guard let home = environment["HOME"], !home.isEmpty else { return nil }
        return home + "/.netrc"
    }

    struct Tokenizer {
        private let scalars: [Unicode.Scalar]
        private var index = 0

        init(_ text: String) { scalars = Array(text.unicodeScalars) }

        mutating func next() -> String? {
            while index < scalars.count, Self.isBlank(scalars[index]) { index += 1 }
            guard index < scalars.count else { return nil }
            var token = String.UnicodeScalarView()
            if scalars[index] == "\"" {
                index += 1
                while index < scalars.count, scalars[index] != "\"" {
                    if scalars[index] == "\\", index + 1 < scalars.count { index += 1 }
                    token.append(scalars[index])
                    index += 1
                }
                index += 1 // the closing quote
            } else {
                while index < scalars.count, !Self.isBlank(scalars[index]) {
                    token.append(scalars[index])
                    index += 1
                }
            }
            return String(token)
        }

        /// Skips a `macdef`'s name and body: everything up to an empty line.
        mutating func skipMacro() {
            while index < scalars.count {
                if scalars[index] == "\n", index + 1 < scalars.count, scalars[index + 1] == "\n" {
                    index += 2
                    return
                }
                index += 1
            }
        }

        private static func isBlank(_ s: Unicode.Scalar) -> Bool { s == " " || s == "\t" || s == "\n" || s == "\r" }
    }
}
