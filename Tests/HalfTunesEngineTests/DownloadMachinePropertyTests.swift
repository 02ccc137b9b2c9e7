// Property: whatever its requests do (end, fail, get refused, see another version, get shed) a download attempt
// ends exactly once, gives back every connection it was granted, starts again from byte 0 at most once, and never
// opens a request for bytes another running request is fetching. Random scenarios, seeded; no I/O.
@testable import HalfTunesEngine
import HalfTunesProtocol
import Testing

@Suite struct DownloadMachinePropertyTests {
    static let MiB: Int64 = 1 << 20

    /// A runner in virtual time that carries out the machine's actions on simulated requests.
    struct Simulation {
        var machine: DownloadMachine
        var rng: SplitMix64
        let total: Int64
        var now = 0.0
        /// Running requests: where they are, and where they stop.
        var requests: [Int: (position: Int64, limit: Int64)] = [:]
        var granted = 0
        var released = 0
        var finishes = 0
        var restarts = 0
        var stopRequested = false
        /// Requests the machine stopped: they end at the next step.
        var stopping: Set<Int> = []
        var problems: [String] = []
        /// Bytes received since the last response started, and the progress reported of them.
        var receivedSinceStart: Int64 = 0
        var reportedSinceStart: Int64 = 0
        /// When the progress timer the machine asked for fires.
        var progressDueAt: Double?

        mutating func feed(_ input: DownloadMachine.Input) {
            let actions = machine.handle(input)
            for action in actions { carryOut(action) }
            check(after: input)
        }

        mutating func carryOut(_ action: DownloadMachine.Action) {
            if finishes > 0 {
                switch action {
                case .open, .plan, .restartFromZero, .finish, .startPlanning:
                    problems.append("\(action) after the attempt finished")
                default: break
                }
            }
            switch action {
            case .startCheckpoints, .startPlanning, .connectionRefused, .flushForCheckpoint, .sync:
                break
            case let .progress(delta, _, _):
                if finishes > 0 { problems.append("progress after the attempt finished") }
                if delta <= 0 { problems.append("a progress report of \(delta) bytes") }
                reportedSinceStart += delta
            case .scheduleProgress(let at):
                if progressDueAt != nil { problems.append("a second progress timer") }
                if at <= now - 1 { problems.append("a progress timer in the past: \(at) at \(now)") }
                progressDueAt = at
            case .limitPrimary(let limit):
                requests[0]?.limit = limit
            case .cancel(let ids), .stopKeepingData(let ids):
                stopping.formUnion(ids)
            case .releaseConnections(let count):
                released += count
            case let .shrink(id, limit), let .extend(id, limit):
                requests[id]?.limit = limit
            case let .open(id, range, _, _, total):
                if total != self.total || range.lowerBound < 0 || range.upperBound > total || range.isEmpty {
                    problems.append("open \(id) for \(range) of \(total)")
                }
                for (other, r) in requests where r.position < r.limit && range.overlaps(r.position..<r.limit) {
                    problems.append("open \(id) for \(range) overlaps request \(other) at \(r.position)..<\(r.limit)")
                }
                requests[id] = (range.lowerBound, range.upperBound)
            case .plan:
                tick(grantAll: true)
            case .restartFromZero:
                restarts += 1
                requests = [0: (0, Int64.max)]
                receivedSinceStart = 0
                reportedSinceStart = 0
                feed(.responseStarted(DownloadMachineTests.start(total: total), acceptsRanges: true, now: now))
            case .finish:
                finishes += 1
                if reportedSinceStart != receivedSinceStart {
                    problems.append("reported \(reportedSinceStart) of \(receivedSinceStart) bytes received at the end")
                }
            }
        }

        mutating func check(after input: DownloadMachine.Input) {
            if finishes > 1 { problems.append("finished \(finishes) times, last after \(input)") }
            if restarts > 1 { problems.append("started again \(restarts) times") }
            if granted - released != machine.extrasHeld {
                problems.append("granted \(granted), released \(released), held \(machine.extrasHeld) after \(input)")
            }
            if machine.extrasHeld > max(0, machine.running.count - 1) {
                problems.append("holds \(machine.extrasHeld) extra connections for \(machine.running.count) requests")
            }
            if finishes == 0, Set(requests.keys) != machine.running {
                problems.append("running \(machine.running.sorted()) but requests \(requests.keys.sorted()) after \(input)")
            }
        }

        mutating func tick(grantAll: Bool) {
            let positions = requests.mapValues(\.position)
            let wanted = machine.connectionsWanted(now: now, positions: positions, ceiling: nil,
                                                   stopRequested: stopRequested)
            let grant = grantAll ? wanted : Int.random(in: 0...wanted, using: &rng)
            granted += grant
            feed(.tick(now: now, positions: positions, ceiling: nil, granted: grant, stopRequested: stopRequested))
        }

        /// Ends request `id` in a random way (`forced`: it failed).
        mutating func end(_ id: Int, forced: Bool = false) {
            guard let request = requests.removeValue(forKey: id) else { return }
            stopping.remove(id)
            let lost = TaskError(code: TaskErrorCode.connectionLost, message: "lost")
            var end = DownloadMachineTests.end(position: request.position, failure: lost)
            if !forced {
                switch Int.random(in: 0..<10, using: &rng) {
                case 0...3 where request.position >= request.limit:
                    end = DownloadMachineTests.end(position: request.limit, reachedLimit: true)
                case 4:
                    end.decided = id == 0 ? .changed(reason: "v2") : .segment(.changed(reason: "v2"))
                case 5 where id > 0:
                    end.decided = .segment(.refused(TaskError(code: TaskErrorCode.serverBusy, message: "503"),
                                                    retryAfter: 2))
                case 6 where id > 0:
                    end.decided = .segment(.unsplittable(reason: "200"))
                case 7:
                    end.transportFailure = nil
                    end.responseEnded = true
                default:
                    break
                }
            }
            feed(.ended(id: id, end, stopRequested: stopRequested))
        }

        mutating func step() {
            now += 0.1
            if let at = progressDueAt, now >= at {
                progressDueAt = nil
                feed(.progressDue(now: now))
            }
            for id in requests.keys.sorted() {
                guard let request = requests[id] else { continue }
                let bytes = Int64.random(in: 0...(3 * MiB), using: &rng)
                let position = min(request.limit, request.position + bytes)
                requests[id]!.position = position
                receivedSinceStart += position - request.position
                feed(.received(bytes: position - request.position, now: now))
            }
            for id in stopping.sorted() { end(id) }
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<55:
                tick(grantAll: Bool.random(using: &rng))
            case 55..<85:
                if let id = requests.keys.randomElement(using: &rng) { end(id) }
            case 85..<93:
                feed(.shed(count: Int.random(in: 1...3, using: &rng)))
            case 93..<96:
                feed(.fileFailed)
            default:
                stopRequested = true
            }
        }
    }

    @Test(arguments: 0..<400)
    func anAttemptEndsOnceAndGivesBackEveryConnection(seed: Int) {
        var rng = SplitMix64(seed: UInt64(seed))
        let total = Int64.random(in: (4 * Self.MiB)...(96 * Self.MiB), using: &rng)
        let connections = Int.random(in: 1...8, using: &rng)
        let keptPrefix = Bool.random(using: &rng) ? Int64.random(in: 0..<total, using: &rng) : 0
        let machine = DownloadMachine(settings: .init(maxConnections: connections),
                                      kept: keptPrefix > 0 ? ByteRanges(prefix: keptPrefix) : ByteRanges())
        var sim = Simulation(machine: machine, rng: rng, total: total)
        sim.requests[0] = (keptPrefix, Int64.max)
        sim.feed(.launched)
        sim.feed(.responseStarted(DownloadMachineTests.start(offset: keptPrefix, total: total,
                                                             status: keptPrefix > 0 ? 206 : 200),
                                  acceptsRanges: true, now: 0))
        for _ in 0..<300 where sim.finishes == 0 { sim.step() }
        // Whatever is left fails: the attempt must end, and not hang with nothing running.
        sim.stopRequested = true
        for _ in 0..<20 where sim.finishes == 0 {
            for id in sim.requests.keys.sorted() { sim.end(id, forced: true) }
            if sim.requests.isEmpty, sim.finishes == 0 {
                sim.problems.append("nothing runs and the attempt did not finish")
                break
            }
        }
        #expect(sim.finishes == 1, "seed \(seed)")
        #expect(sim.granted == sim.released, "seed \(seed): granted \(sim.granted), released \(sim.released)")
        #expect(sim.problems.isEmpty, "seed \(seed): \(sim.problems.prefix(3))")
    }
}
