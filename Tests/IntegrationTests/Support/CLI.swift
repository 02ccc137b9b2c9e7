import Foundation

struct CLIResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs the real `halftunesctl` against a daemon's socket; with `asUser`, as that uid and gid (with no
/// supplementary groups) through setpriv(1), which needs root.
func ctl(_ args: [String], socket: String?, environment extra: [String: String] = [:],
         asUser: (uid: UInt32, gid: UInt32)? = nil, cwd: String? = nil) throws -> CLIResult {
    let p = Process()
    if let cwd { p.currentDirectoryURL = URL(fileURLWithPath: cwd) }
    if let user = asUser {
        p.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        p.arguments = ["--reuid=\(user.uid)", "--regid=\(user.gid)", "--clear-groups", Binaries.ctl] + args
    } else {
        p.executableURL = URL(fileURLWithPath: Binaries.ctl)
        p.arguments = args
    }
    var env = ProcessInfo.processInfo.environment
    if let socket { env["HALFTUNES_SOCKET"] = socket } else { env["HALFTUNES_SOCKET"] = nil }
    for (k, v) in extra { env[k] = v }
    p.environment = env
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    try p.run()
    let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
    let stderrData = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return CLIResult(status: p.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
                     stderr: String(decoding: stderrData, as: UTF8.self))
}
