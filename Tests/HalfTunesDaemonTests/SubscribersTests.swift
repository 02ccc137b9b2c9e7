import NIOEmbedded
import Testing
@testable import HalfTunesDaemon

/// Each session's subscribers and each connection's sessions stay two views of the same subscriptions, whatever
/// is added and taken away: a connection closing lets go exactly its own.
@Suite("Subscribers")
struct SubscribersTests {
    @Test func bothViewsStayInStep() {
        var rng = SplitMix(seed: 42)
        let outboxes = (0..<6).map { Outbox(connectionID: UInt64($0), channel: EmbeddedChannel(), limit: 1 << 20) }
        let sessions = (0..<5).map { "s\($0)" }
        var subscribers = Subscribers()
        var model: Set<[String]> = [] // [session, connection]
        for step in 0..<3_000 {
            let connection = Int(rng.next() % 6), session = sessions[Int(rng.next() % 5)]
            switch rng.next() % 8 {
            case 0...3:
                subscribers.add(outboxes[connection], to: session)
                model.insert([session, String(connection)])
            case 4, 5:
                let removed = subscribers.remove(UInt64(connection), from: session)
                #expect(removed == (model.remove([session, String(connection)]) != nil), "step \(step)")
            case 6:
                let left = subscribers.removeConnection(UInt64(connection))
                let expected = model.filter { $0[1] == String(connection) }.map { $0[0] }.sorted()
                #expect(left == expected, "step \(step)")
                model = model.filter { $0[1] != String(connection) }
            default:
                let told = subscribers.removeSession(session).map(\.connectionID).sorted()
                #expect(told == model.filter { $0[0] == session }.compactMap { UInt64($0[1]) }.sorted(), "step \(step)")
                model = model.filter { $0[0] != session }
            }
            for s in sessions {
                let expected = Set(model.filter { $0[0] == s }.compactMap { UInt64($0[1]) })
                #expect(Set(subscribers[s]?.keys.map { $0 } ?? []) == expected, "step \(step), \(s)")
                #expect(subscribers.count(of: s) == expected.count)
                #expect(subscribers[s]?.isEmpty != true, "an empty entry is dropped")
            }
            for c in 0..<6 {
                let held = model.filter { $0[1] == String(c) && $0[0] != session }.count
                #expect(subscribers.subscriptions(of: UInt64(c), besides: session) == held, "step \(step)")
            }
        }
    }
}
