import HalfTunesProtocol
import Testing
@testable import HalfTunesDaemon

/// `SortedRun`: the chunked sorted run that keeps each owner's and each lane host's queued tasks.
@Suite("SortedRun")
struct SortedRunTests {
    static func key(_ id: Int64, order: Int64, rank: TaskPriority = .normal) -> RunQueue.Key {
        RunQueue.Key(priority: rank, order: order, id: id)
    }

    /// 12,000 random inserts (appends, fronts and middles), removals and pops against a sorted array: every
    /// answer agrees, and the chunks stay within their bounds (so a change in the middle moves one chunk's items).
    @Test func agreesWithASortedArrayThroughRandomChanges() {
        var rng = SplitMix(seed: 281)
        var run = SortedRun<RunQueue.Key>()
        var model: [RunQueue.Key] = []
        var nextID: Int64 = 1
        var order: Int64 = 0
        for step in 0..<12_000 {
            let roll = rng.next() % 100
            if roll < 60 || model.isEmpty { // mostly appends, as queue orders grow
                order += 1
                let key = Self.key(nextID, order: roll < 45 ? order : Int64(rng.next() % UInt64(order + 1)) - 5,
                                   rank: [TaskPriority.low, .normal, .high][Int(rng.next() % 3)])
                nextID += 1
                run.insert(key)
                model.insert(key, at: model.firstIndex { key < $0 } ?? model.count)
            } else if roll < 90 {
                let victim = model[Int(rng.next() % UInt64(model.count))]
                #expect(run.remove(victim) == victim)
                model.removeAll { $0 == victim }
                #expect(run.remove(victim) == nil, "removed twice")
            } else {
                #expect(run.popFirst() == model.first)
                model.removeFirst()
            }
            #expect(run.count == model.count && run.first == model.first && run.last == model.last, "step \(step)")
            if step % 61 == 0 { check(run, against: model, rng: &rng, step: step) }
        }
        #expect(model.count > 4 * SortedRun<RunQueue.Key>.maxChunk, "the run grew past a few chunks")
        while let first = run.popFirst() { #expect(first == model.removeFirst()) }
        #expect(model.isEmpty && run.isEmpty && run.chunkSizes.isEmpty)
    }

    private func check(_ run: SortedRun<RunQueue.Key>, against model: [RunQueue.Key], rng: inout SplitMix, step: Int) {
        #expect(run.elements == model, "step \(step)")
        // Chunks: none above the maximum, and never more than two per half chunk's worth of items (+1).
        let sizes = run.chunkSizes
        #expect(sizes.allSatisfy { 0 < $0 && $0 <= SortedRun<RunQueue.Key>.maxChunk }, "step \(step)")
        #expect(sizes.count <= 2 * model.count / (SortedRun<RunQueue.Key>.maxChunk / 2) + 1, "step \(step): \(sizes.count) chunks for \(model.count)")
        #expect(Array(run.prefix(8)) == Array(model.prefix(8)))
        for _ in 0..<20 {
            let probe = Self.key(Int64(rng.next() % 60_000), order: Int64(rng.next() % 30_000) - 10,
                                 rank: [TaskPriority.low, .normal, .high][Int(rng.next() % 3)])
            let below = model.firstIndex { !($0 < probe) } ?? model.count
            #expect(run.count(below: probe) == below)
            #expect(run.first(notBelow: probe) == (below < model.count ? model[below] : nil))
            #expect(run.first(after: probe) == model.first { probe < $0 })
            #expect(Array(run.items(from: probe).prefix(5)) == Array(model[below...].prefix(5)))
            #expect(run.item(probe) == (model.contains(probe) ? probe : nil))
        }
        if let some = model.randomElement(using: &rng) {
            #expect(run.item(some) == some && run.count(below: some) == model.firstIndex(of: some))
            #expect(run.first(after: some) == model.first { some < $0 })
        }
    }

    /// 100,000 appended, then every other one taken out from the middle outwards: no chunk ever holds more than
    /// the maximum, and what is left is in order.
    @Test func aLongRunTakenOutOfFromTheMiddleKeepsItsChunksSmall() {
        var run = SortedRun<RunQueue.Key>()
        for id in Int64(1)...100_000 { run.insert(Self.key(id, order: id)) }
        #expect(run.chunkSizes.count == 100_000 / (SortedRun<RunQueue.Key>.maxChunk / 2) + 1)
        var low: Int64 = 50_000, high: Int64 = 50_001
        while low >= 1 {
            run.remove(Self.key(low, order: low))
            run.remove(Self.key(high, order: high))
            low -= 2
            high += 2
        }
        #expect(run.count == 50_000)
        // Left: the odd ones up to 50,000 and the even ones past it.
        let left: [Int64] = Array(stride(from: 1, to: 50_000, by: 2)) + Array(stride(from: 50_002, through: 100_000, by: 2))
        #expect(run.elements.map(\.id) == left)
        #expect(run.chunkSizes.allSatisfy { 0 < $0 && $0 <= SortedRun<RunQueue.Key>.maxChunk })
        #expect(run.chunkSizes.count <= 2 * 50_000 / (SortedRun<RunQueue.Key>.maxChunk / 2) + 1)
    }
}

extension SplitMix: RandomNumberGenerator {}
