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
    var env = ["HALFTUNES_SOCKET": socket ?? ""] // none: the default socket
    for (k, v) in extra { env[k] = v }
    return try runBinary(Binaries.ctl, args, environment: env, asUser: asUser, cwd: cwd)
}

/// Runs one of the built binaries with `args`, the test's environment plus `extra` (an empty value removes a
/// variable), and collects its exit status and output.
func runBinary(_ path: String, _ args: [String], environment extra: [String: String] = [:],
               asUser: (uid: UInt32, gid: UInt32)? = nil, cwd: String? = nil) throws -> CLIResult {
    let p = Process()
    if let cwd { p.currentDirectoryURL = URL(fileURLWithPath: cwd) }
    if let user = asUser {
        p.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        p.arguments = ["--reuid=\(user.uid)", "--regid=\(user.gid)", "--clear-groups", path] + args
    } else {
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
    }
    var env = ProcessInfo.processInfo.environment
    for (k, v) in extra { env[k] = v.isEmpty ? nil : v }
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
