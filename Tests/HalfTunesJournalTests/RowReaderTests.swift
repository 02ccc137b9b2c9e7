import GRDB
import Testing
@testable import HalfTunesJournal

/// RowReader's typed reads (the journal's column types without GRDB's generic decoding) give what GRDB's own
/// decoding gives for every storage class, including its conversions and its errors.
@Suite struct RowReaderTests {
    @Test func typedReadsAgreeWithGRDBForEveryStorageClass() throws {
        let db = try DatabaseQueue()
        try db.read { db in
            let row = try #require(try Row.fetchOne(db, sql: "SELECT 7 AS i, 2.5 AS d, 'text' AS s, NULL AS n, 4.0 AS w, x'6869' AS b"))
            let r = RowReader(row)
            for column in ["i", "d", "s", "n", "w", "b"] {
                #expect(same(try r.decode(forColumn: column) as String, try row.decode(String.self, forColumn: column)), "\(column) String")
                #expect(same(try r.decode(forColumn: column) as String?, try row.decode(String?.self, forColumn: column)), "\(column) String?")
                #expect(same(try r.decode(forColumn: column) as Int64, try row.decode(Int64.self, forColumn: column)), "\(column) Int64")
                #expect(same(try r.decode(forColumn: column) as Int64?, try row.decode(Int64?.self, forColumn: column)), "\(column) Int64?")
                #expect(same(try r.decode(forColumn: column) as Double, try row.decode(Double.self, forColumn: column)), "\(column) Double")
                #expect(same(try r.decode(forColumn: column) as Double?, try row.decode(Double?.self, forColumn: column)), "\(column) Double?")
            }
            // A column the statement does not have: GRDB's error.
            #expect(throws: (any Error).self) { try r.decode(forColumn: "missing") as String }
        }
    }

    /// Both give the same value, or both throw.
    private func same<T: Equatable>(_ a: @autoclosure () throws -> T, _ b: @autoclosure () throws -> T) -> Bool {
        switch (Result { try a() }, Result { try b() }) {
        case let (.success(x), .success(y)): return x == y
        case (.failure, .failure): return true
        default: return false
        }
    }
}
