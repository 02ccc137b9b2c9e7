import Foundation
import TestOrigin

func sha256(ofFile path: String) throws -> String {
    guard let data = FileManager.default.contents(atPath: path) else { throw TestFailure("cannot read \(path)") }
    return TestOrigin.sha256Hex(Array(data))
}

/// Files in `dir` whose names start with a dot and end in .partial (the daemon's partial files).
func partialFiles(in dir: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasPrefix(".") && $0.hasSuffix(".partial") }
}
