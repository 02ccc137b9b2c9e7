/// A block of lines redrawn in place on a terminal (progress bars), with permanent lines printed above it.
struct LiveLines {
    private var drawn = 0

    /// Replaces the block with `lines` (each cut to the terminal width so none wraps).
    mutating func draw(_ lines: [String]) {
        if lines.isEmpty && drawn == 0 { return }
        let width = Console.width - 1
        var text = moveToTop()
        for line in lines { text += String(line.prefix(width)) + "\u{1B}[K\n" }
        text += "\u{1B}[J"
        drawn = lines.count
        Console.raw(text)
    }

    /// Prints `line` above the block; the block is gone until the next `draw`.
    mutating func printAbove(_ line: String) {
        Console.raw(moveToTop() + "\u{1B}[J" + line + "\n")
        drawn = 0
    }

    /// Removes the block.
    mutating func clear() {
        if drawn > 0 { Console.raw(moveToTop() + "\u{1B}[J") }
        drawn = 0
    }

    private func moveToTop() -> String { drawn > 0 ? "\u{1B}[\(drawn)A\r" : "\r" }
}
