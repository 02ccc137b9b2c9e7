// Which hosts skip the proxy: a no_proxy list with curl's rules (domain suffixes, IP addresses, CIDR ranges, *).
import Foundation

/// A parsed `no_proxy`-style list: entries separated by commas or blanks.
/// - `*` alone: every host goes direct.
/// - a name (`example.com`, `.example.com`, `*.example.com`): that host and every host under it, case-insensitive.
/// - an IP address (`10.1.2.3`, `::1`, `[::1]`): that address; a CIDR range (`10.0.0.0/8`, `fd00::/8`): the
///   addresses in it. Only a URL whose host is written as an address matches these (names are not resolved).
/// - a `:port` after a name or a bracketed address is ignored, as curl does.
public struct ProxyBypass: Sendable, Hashable {
    public private(set) var all = false
    public private(set) var domains: [String] = []
    public private(set) var networks: [Network] = []
    /// The list as given, normalized (entries joined by ",").
    public private(set) var text = ""

    public struct Network: Sendable, Hashable {
        public var address: [UInt8]
        public var prefixLength: Int

        func contains(_ other: [UInt8]) -> Bool {
            guard other.count == address.count else { return false }
            var bits = prefixLength
            for i in 0..<address.count where bits > 0 {
                let mask: UInt8 = bits >= 8 ? 0xFF : ~(0xFF >> UInt8(bits))
                if address[i] & mask != other[i] & mask { return false }
                bits -= 8
            }
            return true
        }
    }

    public static let none = ProxyBypass()

    public init() {}

    public var isEmpty: Bool { !all && domains.isEmpty && networks.isEmpty }

    /// Parses a list; an entry that is neither a name nor an address or range is an error.
    public static func parse(_ list: String) throws(ProxyError) -> ProxyBypass {
        var bypass = ProxyBypass()
        var kept: [String] = []
        let entries = list.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" }).map(String.init)
        for entry in entries {
            let lowered = entry.lowercased()
            if lowered == "*" {
                bypass.all = true
                kept.append("*")
                continue
            }
            if let network = parseNetwork(lowered) {
                bypass.networks.append(network)
                kept.append(lowered)
                continue
            }
            var name = Substring(lowered)
            if name.hasPrefix("*.") { name = name.dropFirst(2) }
            while name.hasPrefix(".") { name = name.dropFirst() }
            if let colon = name.lastIndex(of: ":"), Int(name[name.index(after: colon)...]) != nil { name = name[..<colon] }
            while name.hasSuffix(".") { name = name.dropLast() }
            guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }) else {
                throw ProxyError("'\(entry)' in the proxy bypass list is neither a host name, an IP address, a CIDR range nor *")
            }
            bypass.domains.append(String(name))
            kept.append(lowered)
        }
        bypass.text = kept.joined(separator: ",")
        return bypass
    }

    /// Whether a request to `host` (a URL's host, IPv6 with or without brackets) skips the proxy.
    public func matches(host: String) -> Bool {
        if all { return true }
        var h = Substring(host.lowercased())
        if h.hasPrefix("["), h.hasSuffix("]") { h = h.dropFirst().dropLast() }
        while h.hasSuffix(".") { h = h.dropLast() }
        if let address = Self.address(String(h)) {
            return networks.contains { $0.contains(address) } || domains.contains { $0 == h }
        }
        for domain in domains {
            if h == domain { return true }
            if h.count > domain.count, h.hasSuffix(domain), h.dropLast(domain.count).hasSuffix(".") { return true }
        }
        return false
    }

    /// `10.0.0.0/8`, `10.1.2.3`, `::1`, `[::1]`, `[::1]:8080`, `fd00::/8`.
    static func parseNetwork(_ entry: String) -> Network? {
        var text = Substring(entry)
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            let after = text[text.index(after: close)...]
            guard after.isEmpty || (after.hasPrefix(":") && Int(after.dropFirst()) != nil) || after.hasPrefix("/") else {
                return nil
            }
            text = text[text.index(after: text.startIndex)..<close] + (after.hasPrefix("/") ? after : "")
        }
        var prefix: Int?
        if let slash = text.firstIndex(of: "/") {
            guard let p = Int(text[text.index(after: slash)...]) else { return nil }
            prefix = p
            text = text[..<slash]
        }
        guard let address = address(String(text)) else { return nil }
        let bits = address.count * 8
        let length = prefix ?? bits
        guard (0...bits).contains(length) else { return nil }
        return Network(address: address, prefixLength: length)
    }

    /// The bytes of an IPv4 or IPv6 address literal.
    static func address(_ text: String) -> [UInt8]? {
        if text.contains(":") {
            var storage = in6_addr()
            guard inet_pton(AF_INET6, text, &storage) == 1 else { return nil }
            return withUnsafeBytes(of: storage) { Array($0) }
        }
        guard text.split(separator: ".", omittingEmptySubsequences: false).count == 4 else { return nil }
        var storage = in_addr()
        guard inet_pton(AF_INET, text, &storage) == 1 else { return nil }
        return withUnsafeBytes(of: storage) { Array($0) }
    }
}
