import HalfTunesCore
import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// The queue's lanes (one session and first proxy of one owner): a scheduler pass skips a held lane whole, and
/// still picks what walking the owner's tasks one by one would.
@Suite("RunQueue lanes")
struct RunQueueLaneTests {
    static let proxies: [ProxyRef?] = [nil, ProxyRef(ProxyServer(kind: .http, host: "127.0.0.1", port: 3001)),
                                       ProxyRef(ProxyServer(kind: .http, host: "127.0.0.1", port: 3002))]

    static func entry(_ id: Int64, owner: UInt32 = 1, order: Int64? = nil, session: String, host: String = "http://a:80",
                      proxy: ProxyRef? = nil, priority: TaskPriority = .normal) -> RunQueue.Entry {
        RunQueue.Entry(key: RunQueue.Key(priority: priority, order: order ?? id, id: id), owner: owner,
                       session: session, host: host, proxy: proxy)
    }

    /// Random queues of several owners, sessions, hosts and proxies, with random holds per session, host, proxy
    /// and task, tasks removed and moved: `next` gives what the first task not held in each owner's start order
    /// gives (the fair choice among those), lanes or not.
    @Test func lanesPickWhatWalkingEveryTaskPicks() {
        var rng = SplitMix(seed: 28)
        let sessions = ["a", "b", "c", "d"], hosts = ["http://x:80", "http://y:80", "http://z:80", "http://w:80", "http://v:80"]
        for round in 0..<400 {
            var q = RunQueue()
            var entries: [Int64: RunQueue.Entry] = [:]
            for id in 1...Int64(rng.next() % 60 + 1) {
                let e = Self.entry(id, owner: UInt32(rng.next() % 3), order: Int64(rng.next() % 80) - 10,
                                   session: sessions[Int(rng.next() % 4)], host: hosts[Int(rng.next() % 5)],
                                   proxy: Self.proxies[Int(rng.next() % 3)],
                                   priority: [TaskPriority.low, .normal, .high][Int(rng.next() % 3)])
                q.insert(e)
                entries[id] = e
            }
            for id in entries.keys.sorted() where rng.next() % 6 == 0 { // some leave, some move
                if rng.next() % 2 == 0 {
                    q.remove(id)
                    entries[id] = nil
                } else { // moved, or its first proxy worked out again (`DaemonState.proxySettings`)
                    var e = entries[id]!
                    if rng.next() % 2 == 0 {
                        e.key = RunQueue.Key(priority: .high, order: -Int64(rng.next() % 5), id: id)
                    } else {
                        e.proxy = Self.proxies[Int(rng.next() % 3)]
                        e.session = sessions[Int(rng.next() % 4)]
                        e.host = hosts[Int(rng.next() % 5)]
                    }
                    q.insert(e)
                    entries[id] = e
                }
            }
            let heldSessions = Set(sessions.filter { _ in rng.next() % 3 == 0 })
            let heldHosts = Set(hosts.filter { _ in rng.next() % 3 == 0 })
            let heldProxies = Set(Self.proxies.compactMap { $0 }.filter { _ in rng.next() % 3 == 0 }.map(\.server))
            let stopping = Set(entries.keys.filter { _ in rng.next() % 9 == 0 })
            func laneHeld(_ owner: UInt32, _ lane: RunQueue.Lane) -> Bool {
                heldSessions.contains(lane.session) || lane.proxy.map { heldProxies.contains($0.server) } ?? false
            }
            func isHeld(_ e: RunQueue.Entry) -> Bool {
                laneHeld(e.owner, RunQueue.Lane(session: e.session, proxy: e.proxy, data: e.data)) || heldHosts.contains(e.host)
                    || stopping.contains(e.id)
            }
            let running: [UInt32: Int] = [0: Int(rng.next() % 3), 1: Int(rng.next() % 3)]
            let served: [UInt32: Int64] = [1: Int64(rng.next() % 4), 2: Int64(rng.next() % 4)]
            // The reference: each owner's first task not held in start order, then the fair choice between owners.
            let firsts = Dictionary(grouping: entries.values, by: \.owner).compactMapValues { run in
                run.sorted { $0.key < $1.key }.first { !isHeld($0) }
            }
            let expected = firsts.values.min { a, b in
                (running[a.owner] ?? 0, served[a.owner] ?? 0, a.key) < (running[b.owner] ?? 0, served[b.owner] ?? 0, b.key)
            }
            let got = q.next(running: { running[$0] ?? 0 }, lastServed: { served[$0] ?? 0 }, isHeld: isHeld,
                             laneHeld: laneHeld, hostHeld: { heldHosts.contains($0) })
            #expect(got?.id == expected?.id, "round \(round)")
            #expect(got == expected.map { entries[$0.id]! }, "round \(round): the entry as inserted")
        }
    }

    /// 10,000 tasks behind their session's limit, then one of another session: the pass looks at the first few
    /// tasks and then at each lane, not at the 10,000 — and removing tasks keeps the lanes in step.
    @Test func aHeldLaneCostsOneLookWhateverItHolds() {
        var q = RunQueue()
        for id in 1...10_000 { q.insert(Self.entry(Int64(id), session: "bulk")) }
        q.insert(Self.entry(10_001, session: "interactive", proxy: Self.proxies[1]))
        var looks = 0
        let held: (RunQueue.Entry) -> Bool = { e in
            looks += 1
            return e.session == "bulk"
        }
        let next = q.next(running: { _ in 0 }, lastServed: { _ in 0 }, isHeld: held, laneHeld: { $1.session == "bulk" })
        #expect(next?.id == 10_001)
        #expect(looks <= RunQueue.scanBeforeLanes + 1, "\(looks) tasks looked at")

        // The interactive task starts; the bulk session is still held: nothing, at the same cost.
        q.remove(10_001)
        looks = 0
        #expect(q.next(running: { _ in 0 }, lastServed: { _ in 0 }, isHeld: held, laneHeld: { $1.session == "bulk" }) == nil)
        #expect(looks <= RunQueue.scanBeforeLanes, "\(looks) tasks looked at")
        // Its limit lifted: its first task, in order, after the first ones were taken out of the middle.
        for id: Int64 in [1, 2, 5_000] { q.remove(id) }
        #expect(q.next(running: { _ in 0 }, lastServed: { _ in 0 }, isHeld: { _ in false })?.id == 3)
        #expect(q.next(running: { _ in 0 }, lastServed: { _ in 0 }, isHeld: { $0.id < 20 })?.id == 20, "past the first 8")
        #expect(q.count == 9_997)
    }

    /// Tasks a host's limit holds in a lane that is not held cost one look for their host, not one each: 8 held
    /// by their host, one of another session, 50,000 more held by the host, then one of the same lane to another
    /// host. And a transfer still stopping holds only its own task.
    @Test func aHeldHostCostsOneLookWhateverItHolds() {
        var q = RunQueue()
        for id in 1...8 { q.insert(Self.entry(Int64(id), session: "bulk", host: "http://h:80")) }
        q.insert(Self.entry(9, session: "other", host: "http://g:80"))
        for id in 10...50_009 { q.insert(Self.entry(Int64(id), session: "bulk", host: "http://h:80")) }
        q.insert(Self.entry(50_010, session: "bulk", host: "http://k:80"))
        var looks = 0, stopping: Set<Int64> = []
        func next() -> RunQueue.Entry? {
            looks = 0
            return q.next(running: { _ in 0 }, lastServed: { _ in 0 }, isHeld: { e in
                looks += 1
                return e.host == "http://h:80" || stopping.contains(e.id)
            }, hostHeld: { host in
                looks += 1
                return host == "http://h:80"
            })
        }
        #expect(next()?.id == 9)
        #expect(looks <= RunQueue.scanBeforeLanes + 6, "\(looks) looks")
        q.remove(9)
        #expect(next()?.id == 50_010)
        #expect(looks <= RunQueue.scanBeforeLanes + 6, "\(looks) looks")
        stopping = [50_010]
        #expect(next() == nil)
        #expect(looks <= RunQueue.scanBeforeLanes + 6, "\(looks) looks")
        // The host's limit lifted: its first task in order past the first ones held one by one (beyond the first
        // 8, so through its lane), after tasks were taken out of its middle and front.
        stopping = []
        for id: Int64 in [1, 2, 25_000] { q.remove(id) }
        #expect(q.next(running: { _ in 0 }, lastServed: { _ in 0 }, isHeld: { $0.id < 20 }, hostHeld: { _ in false })?.id == 20)
        q.remove(20)
        #expect(q.next(running: { _ in 0 }, lastServed: { _ in 0 }, isHeld: { $0.id < 25_010 }, hostHeld: { _ in false })?.id == 25_010)
    }

    /// One lane's tasks over many hosts, inserted, moved and removed at random on one long-lived `LaneRun`: its
    /// first task not held is always what walking all of them in start order finds, with random hosts held whole
    /// and random tasks held one by one (its heap of hosts stays in order through every change).
    @Test func aLaneRunKeepsItsHostsInOrder() {
        var rng = SplitMix(seed: 2828)
        var lane = LaneRun()
        var tasks: [Int64: (key: RunQueue.Key, host: String)] = [:]
        let hosts = (0..<12).map { "http://h\($0):80" }
        for step in 0..<6_000 {
            let id = Int64(rng.next() % 300)
            if let old = tasks[id] {
                lane.remove(old.key, host: old.host)
                tasks[id] = nil
                if rng.next() % 2 == 0 { // moved: to the front, or to another host
                    let key = rng.next() % 2 == 0 ? RunQueue.Key(priority: .high, order: -Int64(step), id: id) : old.key
                    let host = hosts[Int(rng.next() % 12)]
                    lane.insert(key, host: host)
                    tasks[id] = (key, host)
                }
            } else {
                let key = RunQueue.Key(priority: [TaskPriority.low, .normal][Int(rng.next() % 2)], order: Int64(step), id: id)
                let host = hosts[Int(rng.next() % 12)]
                if rng.next() % 5 == 0 { // not in the lane: nothing changes (a host it has, or one it has not)
                    lane.remove(key, host: rng.next() % 2 == 0 ? host : "http://elsewhere:80")
                }
                lane.insert(key, host: host)
                tasks[id] = (key, host)
            }
            guard step % 7 == 0 else { continue }
            let heldHosts = Set(hosts.filter { _ in rng.next() % 3 == 0 })
            let heldTasks = Set(tasks.keys.filter { _ in rng.next() % 4 == 0 })
            let expected = tasks.values.sorted { $0.key < $1.key }
                .first { !heldHosts.contains($0.host) && !heldTasks.contains($0.key.id) }
            let got = lane.first(isHeld: { key, host in heldHosts.contains(host) || heldTasks.contains(key.id) },
                                 hostHeld: { heldHosts.contains($0) })
            #expect(got?.key == expected?.key, "step \(step)")
            #expect(got?.host == expected?.host, "step \(step)")
            #expect(lane.isEmpty == tasks.isEmpty)
        }
    }
}
