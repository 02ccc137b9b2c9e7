// The parts of a URL that messages name, taken apart without parsing it whole (it may be malformed).

package enum URLText {
    /// "host:port" of a URL for messages (the URL itself when it cannot be taken apart).
    package static func hostDescription(_ url: String) -> String {
        guard let (_, rest) = splitScheme(url) else { return url }
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let hostPort = authority.split(separator: "@").last.map(String.init) ?? String(authority)
        return hostPort.isEmpty ? url : hostPort
    }

    /// "scheme://rest" → (scheme, rest).
    package static func splitScheme(_ url: String) -> (scheme: Substring, rest: Substring)? {
        guard let colon = url.firstIndex(of: ":") else { return nil }
        let after = url[url.index(after: colon)...]
        guard after.hasPrefix("//") else { return nil }
        return (url[..<colon], after.dropFirst(2))
    }
}
