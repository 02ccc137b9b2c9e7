// The file name a Content-Disposition header suggests (RFC 6266, RFC 5987), tolerant as browsers are, made safe.
import Foundation

public enum ContentDisposition {
    /// The file name `header` suggests, safe to use in a directory (see `sanitize`); nil when it names none (or
    /// only an unusable one). `filename*` (RFC 5987: `UTF-8''percent-encoded`, or ISO-8859-1) wins over `filename`;
    /// like browsers it accepts a missing disposition type, missing quotes, a trailing `;`, stray spaces, and
    /// percent-encoding in a plain `filename`.
    public static func filename(_ header: String) -> String? {
        let params = parameters(header)
        if let extended = params["filename*"], let decoded = decodeExtended(extended), let name = sanitize(decoded) {
            return name
        }
        if let plain = params["filename"] {
            let decoded = plain.contains("%") ? (plain.removingPercentEncoding ?? plain) : plain
            return sanitize(decoded)
        }
        return nil
    }

    /// The parameters by lower-cased name (the first of each), values unquoted.
    static func parameters(_ header: String) -> [String: String] {
        var result: [String: String] = [:]
        for part in split(header) {
            guard let eq = part.firstIndex(of: "=") else { continue } // the disposition type, or junk
            let name = part[..<eq].trimmingCharacters(in: .whitespaces).lowercased()
            var value = part[part.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            if value.hasPrefix("\""), value.count >= 2 {
                value = unquote(value)
            }
            if !name.isEmpty, result[name] == nil { result[name] = value }
        }
        return result
    }

    /// Splits on `;` outside quoted strings.
    private static func split(_ header: String) -> [String] {
        var parts: [String] = [], current = "", quoted = false, escaped = false
        for c in header {
            if escaped { current.append(c); escaped = false; continue }
            if quoted && c == "\\" { current.append(c); escaped = true; continue }
            if c == "\"" { quoted.toggle() }
            if c == ";" && !quoted {
                parts.append(current)
                current = ""
            } else {
                current.append(c)
            }
        }
        parts.append(current)
        return parts
    }

    /// A quoted-string's content with its backslash escapes resolved (an unterminated one runs to the end).
    private static func unquote(_ value: String) -> String {
        var out = "", escaped = false
        for c in value.dropFirst() {
            if escaped { out.append(c); escaped = false; continue }
            if c == "\\" { escaped = true; continue }
            if c == "\"" { break }
            out.append(c)
        }
        return out
    }

    /// RFC 5987 `charset'language'value`: UTF-8 or ISO-8859-1, percent-decoded.
    static func decodeExtended(_ value: String) -> String? {
        let pieces = value.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard pieces.count == 3 else { return nil }
        let charset = pieces[0].lowercased()
        var bytes: [UInt8] = []
        var i = pieces[2].utf8.startIndex
        let utf8 = pieces[2].utf8
        while i < utf8.endIndex {
            let byte = utf8[i]
            if byte == UInt8(ascii: "%"), let a = utf8.index(i, offsetBy: 1, limitedBy: utf8.endIndex), a < utf8.endIndex,
               let b = utf8.index(a, offsetBy: 1, limitedBy: utf8.endIndex), b < utf8.endIndex,
               let hex = UInt8(String(decoding: [utf8[a], utf8[b]], as: UTF8.self), radix: 16) {
                bytes.append(hex)
                i = utf8.index(after: b)
            } else {
                bytes.append(byte)
                i = utf8.index(after: i)
            }
        }
        switch charset {
        case "utf-8": return String(validating: bytes, as: UTF8.self)
        case "iso-8859-1", "latin1": return String(bytes.map { Character(UnicodeScalar($0)) })
        default: return nil
        }
    }

    /// A name safe in a directory: no `/` or `\` (each becomes `_`, so `../../etc/passwd` stays one name), no
    /// control characters, no bidirectional controls (so `invoice\u{202E}fdp.exe` cannot show as `invoiceexe.pdf`),
    /// no leading dots or surrounding spaces, at most `maxBytes` bytes (the extension kept), never `.` or `..` or
    /// empty (nil). Every name a server or a URL chooses goes through it.
    public static func sanitize(_ name: String, maxBytes: Int = 200) -> String? {
        var cleaned = String(name.unicodeScalars.compactMap { s -> Character? in
            if s == "/" || s == "\\" { return "_" }
            if s.value < 0x20 || s.value == 0x7F || (0x80...0x9F).contains(s.value) { return nil }
            if isBidiControl(s) { return nil }
            return Character(s)
        })
        cleaned = cleaned.trimmingCharacters(in: .whitespaces)
        // By scalar: "." with a combining mark after it is one character that is not ".", but the name's first
        // byte is still a dot (a hidden file; found by the `names` fuzzer).
        while cleaned.unicodeScalars.first == "." { cleaned = String(cleaned.unicodeScalars.dropFirst()) }
        cleaned = cleaned.trimmingCharacters(in: .whitespaces)
        while cleaned.unicodeScalars.first == "." { cleaned = String(cleaned.unicodeScalars.dropFirst()) }
        guard !cleaned.isEmpty, cleaned.contains(where: { $0 != "_" && $0 != "." }) else { return nil }
        if cleaned.utf8.count > maxBytes {
            let dot = cleaned.lastIndex(of: ".")
            let ext = dot.map { String(cleaned[$0...]) }.flatMap { $0.utf8.count <= 16 ? $0 : nil } ?? ""
            var stem = ext.isEmpty ? cleaned : String(cleaned[..<dot!])
            while stem.utf8.count + ext.utf8.count > maxBytes { stem.removeLast() }
            cleaned = stem + ext
        }
        return cleaned
    }

    /// The Unicode bidirectional formatting characters (UAX #9): embeddings and overrides U+202A–U+202E,
    /// isolates U+2066–U+2069, the marks U+200E, U+200F and U+061C.
    static func isBidiControl(_ s: Unicode.Scalar) -> Bool {
        (0x202A...0x202E).contains(s.value) || (0x2066...0x2069).contains(s.value)
            || s.value == 0x200E || s.value == 0x200F || s.value == 0x061C
    }
}
