// Property: whatever arrives and whenever writes end, one request hands every byte it kept to the writer exactly
// once, in order and at its place, never past its limit, never with more than one write in flight unless it is
// being stopped, and never leaves the response held back. Random scenarios, seeded; no I/O.
@testable import HalfTunesEngine
import HalfTunesProtocol
import Testing

@Suite struct RequestMachinePropertyTests {
    struct Simulation {
        var machine: RequestMachine
        var rng: SplitMix64
        let start: Int64
        var limit: Int64
        /// What the runner holds: bytes gathered, writes in flight (their ranges), everything written.
        var pending = 0
        var inFlight: [Range<Int64>] = []
        var written: [Range<Int64>] = []
        var appended: Int64 = 0
        var holding = false
        var stopped = false
        var dropped = false
        var forced = false
        var problems: [String] = []

        mutating func carryOut(_ actions: [RequestMachine.Action], arrived: Int = 0) {
            for action in actions {
                switch action {
                case .append(let n):
                    if stopped { problems.append("append after stop") }
                    if n > arrived { problems.append("kept \(n) of \(arrived) bytes") }
                    pending += n
                    appended += Int64(n)
                    if start + appended > limit { problems.append("wrote up to \(start + appended), limit \(limit)") }
                case .submit(let at):
                    let expected = inFlight.last?.upperBound ?? written.last?.upperBound ?? start
                    if at != expected { problems.append("submit at \(at), expected \(expected)") }
                    if pending == 0 { problems.append("submit with nothing gathered") }
                    inFlight.append(at..<(at + Int64(pending)))
                    pending = 0
                    if inFlight.count > 1, !forced { problems.append("\(inFlight.count) writes in flight") }
                case .dropPending:
                    pending = 0
                    dropped = true
                case .holdBack:
                    if holding { problems.append("held back twice") }
                    if inFlight.isEmpty { problems.append("held back with no write in flight") }
                    holding = true
                case .release:
                    if !holding { problems.append("released with nothing held") }
                    holding = false
                case .stop:
                    stopped = true
                case .begin, .reportComplete, .discardFile, .fileFailed:
                    break
                }
            }
            if machine.pendingBytes != pending { problems.append("machine has \(machine.pendingBytes) pending, runner \(pending)") }
        }

        mutating func completeWrite() {
            guard !inFlight.isEmpty else { return }
            written.append(inFlight.removeFirst())
            carryOut(machine.writeDone(ok: true))
        }
    }

    @Test(arguments: 0..<300)
    func everyKeptByteIsWrittenOnceInOrder(seed: Int) {
        var rng = SplitMix64(seed: UInt64(seed))
        let start = Int64.random(in: 0...(4 << 20), using: &rng)
        let length = Int64.random(in: 1...(6 << 20), using: &rng)
        let range = start..<(start + length)
        let total = range.upperBound + Int64.random(in: 0...(1 << 20), using: &rng)
        var machine = RequestMachine(role: .segment(range: range, total: total, validators: RequestMachineTests.v1))
        _ = machine.head(status: 206, headers: RequestMachineTests.partial(range, total: total),
                         finalURL: RequestMachineTests.url, now: 0, keptCount: 0)
        var sim = Simulation(machine: machine, rng: rng, start: start, limit: range.upperBound)
        var ended = false
        for _ in 0..<400 where !ended {
            switch Int.random(in: 0..<100, using: &sim.rng) {
            case 0..<55:
                let n = Int.random(in: 1...(300 << 10), using: &sim.rng)
                if sim.holding { continue } // the response waits while held back
                sim.carryOut(sim.machine.body(n), arrived: n)
            case 55..<80:
                sim.completeWrite()
            case 80..<88:
                sim.carryOut(sim.machine.flushForCheckpoint())
            case 88..<93:
                let cut = sim.start + Int64.random(in: 0...length, using: &sim.rng)
                let actions = sim.machine.setLimit(cut)
                if cut < sim.limit { sim.limit = max(cut, sim.start + sim.appended) }
                sim.carryOut(actions)
            case 93..<95:
                sim.forced = true
                sim.carryOut(sim.machine.stopKeepingData())
            case 95..<97:
                sim.carryOut(sim.machine.cancel())
            default:
                sim.forced = true
                sim.carryOut(sim.machine.finish())
                ended = true
            }
        }
        if !ended {
            sim.forced = true
            sim.carryOut(sim.machine.finish())
        }
        while !sim.inFlight.isEmpty { sim.completeWrite() }
        #expect(!sim.holding, "seed \(seed): the response is still held back")
        #expect(sim.pending == 0, "seed \(seed): \(sim.pending) bytes never handed to the writer")
        if !sim.dropped {
            let writtenBytes = sim.written.reduce(Int64(0)) { $0 + Int64($1.count) }
            #expect(writtenBytes == sim.appended, "seed \(seed): wrote \(writtenBytes) of \(sim.appended)")
            #expect(sim.machine.position == sim.start + sim.appended, "seed \(seed)")
        }
        #expect(sim.machine.writesInFlight == 0, "seed \(seed)")
        #expect(sim.problems.isEmpty, "seed \(seed): \(sim.problems.prefix(3))")
    }
}
