// Sets of byte offsets of a file (what is written, what is durable), as sorted, disjoint half-open ranges.

/// A set of byte offsets, kept as sorted, disjoint, non-adjacent, non-empty half-open ranges: touching ranges
/// are merged, so the representation of a set is unique (`==` compares sets). A download that writes from the
/// start in order is one range `0..<n`; a segmented one has a range per segment until they meet.
///
/// Text form (the journal's `durable_ranges`, resume tokens): `"0-1048576,4194304-5242880"`, each `start-end`
/// with `end` exclusive, in order; the empty set is `""`.
public struct ByteRanges: Sendable, Hashable, CustomStringConvertible {
    public private(set) var ranges: [Range<Int64>]
    /// The number of bytes in the set (the sum of the ranges' lengths).
    public private(set) var count: Int64

    public init() {
        ranges = []
        count = 0
    }

    /// `0..<length` (empty when `length` ≤ 0).
    public init(prefix length: Int64) {
        ranges = length > 0 ? [0..<length] : []
        count = max(0, length)
    }

    public init<S: Sequence>(_ ranges: S) where S.Element == Range<Int64> {
        self.init()
        for range in ranges { insert(range) }
    }

    public var isEmpty: Bool { ranges.isEmpty }
    /// One past the highest offset in the set (0 when empty).
    public var upperBound: Int64 { ranges.last?.upperBound ?? 0 }
    /// The length of the range that starts at 0 (0 when there is none).
    public var prefixLength: Int64 { ranges.first.map { $0.lowerBound == 0 ? $0.upperBound : 0 } ?? 0 }
    /// Empty, or one range that starts at 0: what a download written in order holds.
    public var isPrefix: Bool { ranges.count <= 1 && prefixLength == count }

    /// Adds the offsets of `range` (ignored when empty or negative).
    public mutating func insert(_ range: Range<Int64>) {
        guard !range.isEmpty, range.lowerBound >= 0 else { return }
        // The first range that ends at or after the new one's start: it and the following ones that start at or
        // before its end merge with it.
        let first = firstIndex(endingAtOrAfter: range.lowerBound)
        var last = first
        var lower = range.lowerBound, upper = range.upperBound
        while last < ranges.count, ranges[last].lowerBound <= upper {
            lower = min(lower, ranges[last].lowerBound)
            upper = max(upper, ranges[last].upperBound)
            count -= Int64(ranges[last].count)
            last += 1
        }
        ranges.replaceSubrange(first..<last, with: CollectionOfOne(lower..<upper))
        count += upper - lower
    }

    public mutating func formUnion(_ other: ByteRanges) {
        for range in other.ranges { insert(range) }
    }

    public func union(_ other: ByteRanges) -> ByteRanges {
        var result = self
        result.formUnion(other)
        return result
    }

    /// The offsets in both sets.
    public func intersection(_ other: ByteRanges) -> ByteRanges {
        var result = ByteRanges()
        var i = 0, j = 0
        while i < ranges.count, j < other.ranges.count {
            let a = ranges[i], b = other.ranges[j]
            let lower = max(a.lowerBound, b.lowerBound), upper = min(a.upperBound, b.upperBound)
            if lower < upper { result.append(lower..<upper) }
            if a.upperBound < b.upperBound { i += 1 } else { j += 1 }
        }
        return result
    }

    /// The offsets below `length` (what a file of that length can hold).
    public func clipped(to length: Int64) -> ByteRanges {
        intersection(ByteRanges(prefix: length))
    }

    /// Whether every offset of `range` is in the set.
    public func contains(_ range: Range<Int64>) -> Bool {
        if range.isEmpty { return true }
        let index = firstIndex(endingAtOrAfter: range.lowerBound + 1)
        return index < ranges.count && ranges[index].lowerBound <= range.lowerBound
            && ranges[index].upperBound >= range.upperBound
    }

    /// Whether the set is exactly `0..<total`.
    public func covers(total: Int64) -> Bool {
        total <= 0 ? isEmpty : (ranges.count == 1 && ranges[0] == 0..<total)
    }

    /// The ranges of `0..<total` not in the set, in order.
    public func gaps(total: Int64) -> [Range<Int64>] {
        var result: [Range<Int64>] = []
        var position: Int64 = 0
        for range in ranges {
            if range.lowerBound >= total { break }
            if range.lowerBound > position { result.append(position..<range.lowerBound) }
            position = max(position, range.upperBound)
        }
        if position < total { result.append(position..<total) }
        return result
    }

    /// The longest gap of `0..<total` (the first of equal ones), nil when the set covers it.
    public func largestGap(total: Int64) -> Range<Int64>? {
        var best: Range<Int64>?
        for gap in gaps(total: total) where gap.count > (best?.count ?? 0) { best = gap }
        return best
    }

    // MARK: - Text form

    public var text: String {
        var result = ""
        for range in ranges {
            if !result.isEmpty { result += "," }
            result += "\(range.lowerBound)-\(range.upperBound)"
        }
        return result
    }

    public var description: String { text.isEmpty ? "∅" : text }

    /// Parses the text form; nil for anything else (unordered, overlapping, touching or empty ranges
    /// included: the form is canonical).
    public init?(text: String) {
        self.init()
        if text.isEmpty { return }
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let bounds = part.split(separator: "-", omittingEmptySubsequences: false)
            guard bounds.count == 2, let lower = Int64(bounds[0]), let upper = Int64(bounds[1]),
                  lower >= 0, upper > lower, lower > (ranges.last?.upperBound ?? -1) else { return nil }
            ranges.append(lower..<upper)
            count += upper - lower
        }
    }

    // MARK: - Private

    /// Appends a range that starts after every range in the set (merging when it touches the last one).
    private mutating func append(_ range: Range<Int64>) {
        if let last = ranges.last, last.upperBound == range.lowerBound {
            ranges[ranges.count - 1] = last.lowerBound..<range.upperBound
        } else {
            ranges.append(range)
        }
        count += Int64(range.count)
    }

    /// The index of the first range whose `upperBound` ≥ `offset` (binary search; `ranges.count` if none).
    private func firstIndex(endingAtOrAfter offset: Int64) -> Int {
        var low = 0, high = ranges.count
        while low < high {
            let mid = (low + high) / 2
            if ranges[mid].upperBound < offset { low = mid + 1 } else { high = mid }
        }
        return low
    }
}

/// Encoded as its text form.
extension ByteRanges: Codable {
    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let value = ByteRanges(text: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not byte ranges: \(text)")
        }
        self = value
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }
}
