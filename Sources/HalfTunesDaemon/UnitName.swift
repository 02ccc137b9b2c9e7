// systemd unit names for a session's launchUnit: validation, systemd-escape, a template's instance.
import Foundation

/// The unit-name rules of systemd (`unit_name_is_valid`, `unit_name_escape`), for services only.
enum UnitName {
    /// systemd's UNIT_NAME_MAX (256) less the terminating NUL.
    static let maxLength = 255
    private static let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:-_.\\@".utf8)

    /// Why `name` cannot be a `launchUnit`, or nil: a service name (`name.service`), a template
    /// (`name@.service`) or an instance (`name@instance.service`), in systemd's characters.
    static func problem(_ name: String) -> String? {
        let bytes = Array(name.utf8)
        guard name.hasSuffix(".service"), bytes.count > ".service".count, bytes.count <= maxLength,
              bytes.allSatisfy({ allowed.contains($0) }) else {
            return "launchUnit must be a systemd service name such as app-events.service or app-events@.service "
                + "(letters, digits and : - _ . \\ @, ending in .service, at most \(maxLength) bytes; got '\(name.prefix(80))')"
        }
        let stem = name.dropLast(".service".count)
        let ats = stem.filter { $0 == "@" }.count
        if ats > 1 || stem.hasPrefix("@") {
            return "launchUnit '\(name)' is not a valid unit name: at most one @, with a name before it"
        }
        return nil
    }

    /// The unit to start for a session: a template (`name@.service`) gets the escaped identifier as its instance.
    static func resolve(_ launchUnit: String, session name: String) -> String {
        guard launchUnit.hasSuffix("@.service") else { return launchUnit }
        return String(launchUnit.dropLast(".service".count)) + escape(name) + ".service"
    }

    /// `systemd-escape`: `/` becomes `-`; bytes other than ASCII letters, digits, `:`, `_` and `.` (and a leading
    /// `.`) become `\xNN`.
    static func escape(_ text: String) -> String {
        var out = ""
        for (index, byte) in text.utf8.enumerated() {
            let c = Character(UnicodeScalar(byte))
            if byte == UInt8(ascii: "/") {
                out.append("-")
            } else if byte < 0x80, c.isLetter || c.isNumber || c == ":" || c == "_" || (c == "." && index > 0) {
                out.append(c)
            } else {
                out += String(format: "\\x%02x", byte)
            }
        }
        return out
    }
}
