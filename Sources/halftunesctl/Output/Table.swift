/// Left-aligned text columns; the last column is not padded.
struct Table {
    let headers: [String]
    private(set) var rows: [[String]] = []

    init(_ headers: String...) { self.headers = headers }

    mutating func add(_ cells: String...) { rows.append(cells) }

    func render() -> String {
        var widths = headers.map(\.count)
        for row in rows {
            for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            var text = ""
            for (i, cell) in cells.enumerated() {
                if i == cells.count - 1 { text += cell } else {
                    text += cell + String(repeating: " ", count: widths[i] - cell.count + 2)
                }
            }
            return text
        }
        return ([line(headers)] + rows.map(line)).joined(separator: "\n")
    }
}
