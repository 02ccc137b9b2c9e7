// A relaunched client for the tests: handles its session's events with HalfTunesKit, writes what it received.
//
// Usage: halftunes-event-probe --socket PATH --session ID --out FILE [--fail-first MARKER]
// Appends to FILE one line per delegate call of this run, between "run <pid>" and "end acknowledged <n>" (or
// "end exit 1 without acknowledging"). With --fail-first, the first run (MARKER absent: it is created) receives
// every event and exits 1 without acknowledging them, as a crashing client would.
import Foundation
import HalfTunesKit

final class Recorder: BackgroundSessionDelegate, @unchecked Sendable {
    var lines: [String] = []
    func session(_ s: BackgroundSession, task: Int64, didFinishDownloadingTo location: String) {
        lines.append("didFinishDownloading \(task) \(location)")
    }
    func session(_ s: BackgroundSession, task: Int64, didCompleteWithError error: TaskError?) {
        lines.append("didComplete \(task) \(error?.code ?? "ok")")
    }
    func didFinishEvents(forBackgroundSession s: BackgroundSession) {
        lines.append("didFinishEvents through \(s.lastDeliveredSeq ?? 0)")
    }
}

func option(_ name: String) -> String? {
    let args = CommandLine.arguments
    guard let i = args.firstIndex(of: name), i + 1 < args.count else { return nil }
    return args[i + 1]
}

func append(_ text: String, to path: String) {
    let data = Data(text.utf8)
    if let handle = FileHandle(forWritingAtPath: path) {
        handle.seekToEndOfFile()
        handle.write(data)
        try? handle.close()
    } else {
        _ = FileManager.default.createFile(atPath: path, contents: data)
    }
}

guard let socket = option("--socket"), let session = option("--session"), let out = option("--out") else {
    FileHandle.standardError.write(Data("usage: halftunes-event-probe --socket PATH --session ID --out FILE [--fail-first MARKER]\n".utf8))
    exit(2)
}
let recorder = Recorder()
var header = "run \(getpid())\n"
if let marker = option("--fail-first"), !FileManager.default.fileExists(atPath: marker) {
    _ = FileManager.default.createFile(atPath: marker, contents: nil)
    // Receive everything, as the real handler would, but never acknowledge.
    let s = try BackgroundSession.open(identifier: session, socketPath: socket)
    let stream = try s.events(after: 0)
    while let event = try stream.nextEvent() {
        switch event.payload {
        case .didFinishDownloading(let location): recorder.lines.append("didFinishDownloading \(event.task ?? 0) \(location)")
        case .didComplete(let error, _): recorder.lines.append("didComplete \(event.task ?? 0) \(error?.code ?? "ok")")
        case .didFinishEvents: recorder.lines.append("didFinishEvents")
        default: break
        }
        if case .didFinishEvents = event.payload { break }
    }
    append(header + recorder.lines.map { $0 + "\n" }.joined() + "end exit 1 without acknowledging\n", to: out)
    exit(1)
}
do {
    let n = try BackgroundSession.handleEvents(forSession: session, delegate: recorder, socketPath: socket)
    header += recorder.lines.map { $0 + "\n" }.joined()
    append(header + "end acknowledged \(n)\n", to: out)
} catch {
    append(header + "end error \(error)\n", to: out)
    exit(3)
}
