// SegmentPlanner in virtual time: simulated servers with per-connection and total rate limits, no sockets.
import HalfTunesCore
import HalfTunesProtocol
import Testing

@Suite struct SegmentPlannerTests {
    static let MiB: Int64 = 1 << 20

    /// A server in virtual time: each connection gets at most `perConnection` bytes per second, all of them
    /// together at most `overall`; a new connection starts sending after `latency`.
    struct Simulation {
        var planner: SegmentPlanner
        var perConnection: Double
        var overall: Double
        var latency = 0.02
        var step = 0.01
        /// A server that paces in bursts (nginx `limit_rate` at low rates): each connection's bytes arrive at
        /// once every `burstPeriod` seconds instead of continuously.
        var burstPeriod: Double?
        var credit: [Int: Double] = [:]
        var now = 0.0
        var running: [Int: (position: Int64, limit: Int64, since: Double)] = [:]
        var written = ByteRanges()
        var mostConnections = 1
        var connectionsOpened = 1
        var shrinks: [(id: Int, limit: Int64, position: Int64)] = []
        /// Extra connections the daemon grants at once (`mayOpen`), those held, and the most held.
        var grants = Int.max
        var held = 0
        var mostHeld = 0
        /// At this time `grants` becomes `laterGrants`.
        var grantsChangeAt = Double.infinity
        var laterGrants = Int.max

        init(total: Int64, kept: ByteRanges = ByteRanges(), maxConnections: Int, perConnection: Double,
             overall: Double = .infinity) {
            let from = kept.prefixLength
            planner = SegmentPlanner(settings: .init(maxConnections: maxConnections), total: total, kept: kept,
                                     primaryFrom: from, now: 0)
            self.perConnection = perConnection
            self.overall = overall
            written = kept
            running[0] = (from, planner.primaryLimit, 0)
        }

        /// Runs until the planner has every byte (or `limit` seconds); ticks every 0.25 s.
        mutating func run(limit: Double = 600) {
            var nextTick = 0.25
            while !planner.isComplete, now < limit {
                now += step
                let active = running.filter { now - $0.value.since >= latency }
                let share = min(perConnection, overall / Double(max(1, active.count)))
                for (id, r) in active {
                    var bytes = share * step
                    if let period = burstPeriod {
                        credit[id, default: 0] += bytes
                        let phase = (now - r.since) / period
                        guard Int(phase) != Int(phase - step / period) else { continue }
                        bytes = credit.removeValue(forKey: id) ?? 0
                    }
                    let end = min(r.limit, r.position + Int64(bytes))
                    written.insert(r.position..<end)
                    running[id]!.position = end
                    planner.progress(id, position: end)
                    if end >= r.limit {
                        running[id] = nil
                        credit[id] = nil
                        held = min(held, max(0, running.count - 1))
                        planner.ended(id, position: end, .reachedLimit)
                        apply(tick())
                    }
                }
                if now >= nextTick {
                    nextTick += 0.25
                    if now >= grantsChangeAt { grants = laterGrants }
                    apply(tick())
                }
                mostConnections = max(mostConnections, running.count)
            }
        }

        /// The planner's tick, with extra connections granted while `held < grants`.
        mutating func tick() -> [SegmentPlanner.Action] {
            var held = self.held
            let grants = self.grants
            let actions = planner.tick(now: now, mayOpen: {
                guard held < grants else { return false }
                held += 1
                return true
            })
            self.held = held
            mostHeld = max(mostHeld, held)
            return actions
        }

        mutating func apply(_ actions: [SegmentPlanner.Action]) {
            for action in actions {
                switch action {
                case let .open(id, range):
                    #expect(running[id] == nil)
                    running[id] = (range.lowerBound, range.upperBound, now)
                    connectionsOpened += 1
                case let .shrink(id, limit):
                    let r = running[id]!
                    shrinks.append((id, limit, r.position))
                    #expect(limit > r.position, "a shrink never cuts below what the segment has")
                    running[id]!.limit = limit
                case let .extend(id, limit):
                    running[id]!.limit = limit
                }
            }
            #expect(running.count <= planner.settings.maxConnections)
        }
    }

    /// nginx with `limit_rate 16m` per connection: the planner keeps adding connections while they pay, so
    /// 256 MiB takes well under the 4.2 s aria2 -x4 needs, and far less than one connection's 16 s.
    @Test func aPerConnectionLimitIsBeatenWithSeveralConnections() {
        var sim = Simulation(total: 256 * Self.MiB, maxConnections: 8, perConnection: 16 * 1_048_576)
        sim.run()
        #expect(sim.planner.isComplete && sim.written.covers(total: 256 * Self.MiB))
        #expect(sim.mostConnections >= 6, "at most \(sim.mostConnections) connections")
        #expect(sim.now < 4.0, "took \(sim.now) s")
    }

    /// A server (or a CPU) with one overall limit: a second connection gains nothing, so the planner goes
    /// back to one and never opens more.
    @Test func anOverallLimitKeepsOneConnection() {
        var sim = Simulation(total: 1024 * Self.MiB, maxConnections: 8, perConnection: 1e9, overall: 1e9)
        sim.run()
        #expect(sim.planner.isComplete && sim.written.covers(total: 1024 * Self.MiB))
        #expect(sim.mostConnections <= 2)
        #expect(sim.connectionsOpened <= 2, "opened \(sim.connectionsOpened)")
    }

    /// Extra connections come one grant at a time: with one granted the download uses two; refusals leave
    /// the planner's growth where it was, so once more are granted it goes on adding connections.
    @Test func deniedConnectionsAreAskedForAgainLater() {
        var sim = Simulation(total: 256 * Self.MiB, maxConnections: 8, perConnection: 16 * 1_048_576)
        sim.grants = 1
        sim.grantsChangeAt = 3
        sim.laterGrants = 5
        sim.run(limit: 2.9)
        #expect(sim.mostConnections == 2 && sim.mostHeld == 1, "\(sim.mostConnections) connections before more were granted")
        sim.run()
        #expect(sim.planner.isComplete && sim.written.covers(total: 256 * Self.MiB))
        #expect(sim.mostConnections >= 5 && sim.mostHeld <= 5, "at most \(sim.mostConnections) connections")
        #expect(sim.held == 0)
    }

    /// A download held to a bandwidth limit gets nothing from more connections: none is added while the rate
    /// is near the limit; once the limit is lifted, connections are added again.
    @Test func aBandwidthLimitKeepsOneConnection() {
        var planner = SegmentPlanner(settings: .init(maxConnections: 8), total: 1024 * Self.MiB, kept: ByteRanges(),
                                     primaryFrom: 0, now: 0)
        let rate: Int64 = 4 * Self.MiB // per second, what the limit lets through
        var t = 0.0, position: Int64 = 0
        var opened = 0
        while t < 5 {
            t += 0.1
            position += rate / 10
            planner.progress(0, position: position)
            opened += planner.tick(now: t, ceiling: Double(rate)).filter { if case .open = $0 { true } else { false } }.count
        }
        #expect(opened == 0)
        t += 0.1
        position += rate / 10
        planner.progress(0, position: position)
        #expect(planner.tick(now: t, ceiling: nil).contains { if case .open = $0 { true } else { false } })
    }

    /// nginx with a low `limit_rate` sends each connection a second's worth at once: the planner measures
    /// over twice the pauses it sees, so it still finds that more connections pay.
    @Test func aServerThatSendsInBurstsIsStillSplit() {
        var sim = Simulation(total: 64 * Self.MiB, maxConnections: 6, perConnection: 2 * 1_048_576)
        sim.burstPeriod = 1
        sim.run()
        #expect(sim.planner.isComplete && sim.written.covers(total: 64 * Self.MiB))
        #expect(sim.planner.longestPause >= 0.7 && sim.planner.window >= 1.4, "pause \(sim.planner.longestPause)")
        #expect(sim.mostConnections >= 4, "at most \(sim.mostConnections) connections")
        #expect(sim.now < 16, "took \(sim.now) s (one connection: 32 s)")
    }

    @Test func smallFilesAreNeverSplit() {
        var sim = Simulation(total: 4 * Self.MiB, maxConnections: 8, perConnection: 16 * 1_048_576)
        sim.run()
        #expect(sim.planner.isComplete && sim.connectionsOpened == 1)
    }

    @Test func oneConnectionAllowedMeansNoSplit() {
        var sim = Simulation(total: 256 * Self.MiB, maxConnections: 1, perConnection: 64 * 1_048_576)
        sim.run()
        #expect(sim.planner.isComplete && sim.connectionsOpened == 1)
    }

    /// Gaps left by an earlier attempt are all fetched: one after another with one connection, and every
    /// byte exactly where it belongs.
    @Test func gapsAfterACrashAreFetchedEvenWithOneConnection() {
        let kept = ByteRanges([0..<10 * Self.MiB, 30 * Self.MiB..<40 * Self.MiB, 50 * Self.MiB..<60 * Self.MiB])
        for connections in [1, 4] {
            var sim = Simulation(total: 64 * Self.MiB, kept: kept, maxConnections: connections,
                                 perConnection: 8 * 1_048_576)
            #expect(sim.planner.primaryLimit == 30 * Self.MiB, "the first request stops where kept data begins")
            sim.run()
            #expect(sim.planner.isComplete && sim.written.covers(total: 64 * Self.MiB))
            #expect(sim.mostConnections <= connections)
            if connections == 1 { #expect(sim.connectionsOpened == 3) }
        }
    }

    /// A refused extra connection lowers the cap to what runs; an unsplittable answer to one connection.
    @Test func refusalsLowerTheCap() {
        var planner = SegmentPlanner(settings: .init(maxConnections: 8), total: 1024 * Self.MiB, kept: ByteRanges(),
                                     primaryFrom: 0, now: 0)
        var positions: [Int: Int64] = [0: 0]
        var t = 0.0
        var opened: [Int] = []
        while opened.count < 3, t < 5 {
            t += 0.25
            for (id, p) in positions {
                positions[id] = p + 4 * Self.MiB
                planner.progress(id, position: p + 4 * Self.MiB)
            }
            for case let .open(id, range) in planner.tick(now: t) {
                opened.append(id)
                positions[id] = range.lowerBound
            }
        }
        #expect(opened.count == 3 && planner.activeCount == 4, "\(opened)")
        planner.ended(opened[2], position: 0, .refused)
        #expect(planner.cap == 3)
        planner.ended(opened[1], position: 0, .unsplittable)
        #expect(planner.cap == 1)
        #expect(planner.tick(now: t + 0.25).isEmpty, "nothing more is opened while two still run")
    }
}
