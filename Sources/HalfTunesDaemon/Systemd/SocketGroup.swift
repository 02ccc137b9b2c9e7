import Foundation

/// Resolves the `socket-group` setting: a group name from the group database, or a number.
enum SocketGroup {
    static func gid(of text: String) -> gid_t? {
        if let number = gid_t(text) { return number }
        guard let entry = getgrnam(text) else { return nil }
        return entry.pointee.gr_gid
    }
}
