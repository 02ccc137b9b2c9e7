// The daemon's sessions by identifier, with an index by owner uid kept up to date by every write.

/// The sessions in memory. A caller's own sessions (`task.list`, `session.list`, the per-uid session cap) are
/// read from the index by uid instead of a walk over every user's sessions. Every write goes through the
/// subscript (also `sessions[id]?.field = value`); a session's owner never changes, so only an insert or a
/// removal changes the index.
struct SessionTable: Sequence {
    private var byID: [String: ManagedSession] = [:]
    private var byUID: [UInt32: Set<String>] = [:]

    init() {}

    subscript(identifier: String) -> ManagedSession? {
        get { byID[identifier] }
        set {
            let before = byID[identifier]?.record.uid
            byID[identifier] = newValue
            reindex(identifier, from: before, to: newValue?.record.uid)
        }
        _modify {
            let before = byID[identifier]?.record.uid
            defer { reindex(identifier, from: before, to: byID[identifier]?.record.uid) }
            yield &byID[identifier]
        }
    }

    private mutating func reindex(_ identifier: String, from before: UInt32?, to after: UInt32?) {
        guard before != after else { return }
        if let before {
            byUID[before]?.remove(identifier)
            if byUID[before]?.isEmpty == true { byUID[before] = nil }
        }
        if let after { byUID[after, default: []].insert(identifier) }
    }

    var count: Int { byID.count }
    var values: Dictionary<String, ManagedSession>.Values { byID.values }

    /// The identifiers of `uid`'s sessions, unordered.
    func identifiers(of uid: UInt32) -> Set<String> { byUID[uid] ?? [] }

    func makeIterator() -> Dictionary<String, ManagedSession>.Iterator { byID.makeIterator() }
}
