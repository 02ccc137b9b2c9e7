import HalfTunesProtocol

/// Finds request fields the daemon would silently ignore: an unknown (or misspelled) field is refused,
/// so a client never believes an option took effect when it did not.
enum StrictParams {
    /// Paths ("configuration.retyr") of the fields in `input` that decoding did not use, found by
    /// comparing the input with the decoded value encoded again. Fields set to null are allowed (they
    /// mean "absent").
    static func unknownFields(input: JSONValue, decoded: JSONValue, path: String = "") -> [String] {
        switch (input, decoded) {
        case (.object(let given), .object(let used)):
            var unknown: [String] = []
            for key in given.keys.sorted() {
                let value = given[key]!
                let child = path.isEmpty ? key : path + "." + key
                guard let echo = used[key] else {
                    if value != .null { unknown.append(child) }
                    continue
                }
                unknown += unknownFields(input: value, decoded: echo, path: child)
            }
            return unknown
        case (.array(let given), .array(let used)) where given.count == used.count:
            return zip(given, used).enumerated().flatMap { i, pair in
                unknownFields(input: pair.0, decoded: pair.1, path: "\(path)[\(i)]")
            }
        default:
            return []
        }
    }

    /// `unknownFields` for parameters read directly that name the members they read (`JSONValueParams`): the
    /// members of `input` outside `known` that are not null, sorted.
    static func unknownMembers(input: [String: JSONValue], known: Set<String>) -> [String] {
        input.filter { !known.contains($0.key) && $0.value != .null }.keys.sorted()
    }
}
