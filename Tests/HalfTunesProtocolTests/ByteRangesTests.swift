// ByteRanges against a plain set of offsets (random inserts), and its text form.
import HalfTunesProtocol
import Testing

@Suite struct ByteRangesTests {
    @Test func insertsMergeTouchingAndOverlappingRanges() {
        var set = ByteRanges()
        set.insert(10..<20)
        set.insert(30..<40)
        #expect(set.ranges == [10..<20, 30..<40] && set.count == 20)
        set.insert(20..<30)
        #expect(set.ranges == [10..<40] && set.count == 30)
        set.insert(0..<5)
        set.insert(50..<60)
        set.insert(3..<55)
        #expect(set.ranges == [0..<60] && set.count == 60 && set.isPrefix && set.prefixLength == 60)
        set.insert(70..<70)
        set.insert(-5..<3)
        #expect(set.ranges == [0..<60], "empty and negative ranges are ignored")
    }

    @Test func matchesASetOfOffsets() {
        var rng = Random(seed: 0xB17E5)
        for _ in 0..<300 {
            var set = ByteRanges(), other = ByteRanges()
            var bits = Set<Int64>(), otherBits = Set<Int64>()
            for _ in 0..<rng.next(12) {
                let a = Int64(rng.next(200)), b = a + Int64(rng.next(30))
                set.insert(a..<b)
                bits.formUnion(a..<b)
                let c = Int64(rng.next(200)), d = c + Int64(rng.next(40))
                other.insert(c..<d)
                otherBits.formUnion(c..<d)
            }
            #expect(offsets(set) == bits)
            #expect(set.count == Int64(bits.count))
            #expect(set.upperBound == (bits.max().map { $0 + 1 } ?? 0))
            #expect(zip(set.ranges, set.ranges.dropFirst()).allSatisfy { $0.upperBound < $1.lowerBound },
                    "sorted, disjoint, not touching: \(set)")
            #expect(offsets(set.intersection(other)) == bits.intersection(otherBits))
            #expect(offsets(set.union(other)) == bits.union(otherBits))
            let length = Int64(rng.next(240))
            #expect(offsets(set.clipped(to: length)) == bits.filter { $0 < length })
            let gaps = set.gaps(total: length)
            #expect(Set(gaps.flatMap { Array($0) }) == Set(0..<length).subtracting(bits))
            #expect(set.largestGap(total: length)?.count == gaps.map(\.count).max())
            #expect(set.covers(total: length) == (bits == Set(0..<length)))
            let a = Int64(rng.next(220)), b = a + Int64(rng.next(20))
            #expect(set.contains(a..<b) == Set(a..<b).isSubset(of: bits), "\(set) contains \(a)..<\(b)")
            #expect(ByteRanges(text: set.text) == set)
            #expect(set.isPrefix == (bits == Set(0..<Int64(bits.count))))
        }
    }

    @Test func textForm() {
        #expect(ByteRanges(prefix: 1_048_576).text == "0-1048576")
        #expect(ByteRanges([0..<1_048_576, 4_194_304..<5_242_880]).text == "0-1048576,4194304-5242880")
        #expect(ByteRanges(text: "") == ByteRanges())
        #expect(ByteRanges(text: "0-10,20-30")?.count == 20)
        for bad in ["x", "0-", "-5", "5-5", "6-5", "0-10,10-20", "0-10,5-20", "20-30,0-10", "0-10,", ",0-10",
                    "-1-5", "0-10;20-30", " 0-10"] {
            #expect(ByteRanges(text: bad) == nil, "\(bad)")
        }
    }

    private func offsets(_ set: ByteRanges) -> Set<Int64> {
        Set(set.ranges.flatMap { Array($0) })
    }

    private struct Random {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func next(_ bound: Int) -> Int {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(bound))
        }
    }
}
