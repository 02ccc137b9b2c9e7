// A session's `credentials`: checked when stored, shown without the password.
import HalfTunesProtocol

enum SessionCredentials {
    /// The stored form: the user and password as given, or, when the password is `***` (the form `presented` shows)
    /// and the user is the stored one, the stored password, so a client may send back the configuration it was given.
    static func resolve(_ given: Credentials?, stored: Credentials?) throws(RPCError) -> Credentials? {
        guard var given else { return nil }
        guard !given.user.isEmpty, !given.user.contains(":") else {
            throw RPCError.invalidParams("configuration.credentials.user must be a non-empty name without ':' (Basic "
                + "authentication cannot carry one)")
        }
        guard !(given.user + given.password).unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw RPCError.invalidParams("configuration.credentials must not contain control characters")
        }
        if given.password == Credentials.redacted {
            guard let stored, stored.user == given.user else {
                throw RPCError.invalidParams("configuration.credentials.password '***' keeps a stored password, but this "
                    + "session has none for user '\(given.user)'; send the password itself")
            }
            given.password = stored.password
        }
        return given
    }

    /// As clients see them: the password replaced by `***`.
    static func presented(_ stored: Credentials?) -> Credentials? {
        stored.map { Credentials(user: $0.user, password: Credentials.redacted) }
    }
}
