import Foundation
import TestOrigin

/// A real proxy or server from Debian on 127.0.0.1 — tinyproxy and squid (HTTP: forwarding, CONNECT), dante's danted (SOCKS5), BusyBox
/// httpd (an origin that ignores If-Range), nginx, apache2, lighttpd — with its own configuration and log in a temporary directory; stopped
/// with SIGKILL and removed by `stop()`.
final class ProxyProcess: @unchecked Sendable {
    let dir: TempDir
    let port: Int
    let scheme: String
    let logPath: String
    /// The proxy's pid, also its process group.
    private let pid: Int32

    private init(dir: TempDir, port: Int, scheme: String, logPath: String, pid: Int32) {
        self.dir = dir
        self.port = port
        self.scheme = scheme
        self.logPath = logPath
        self.pid = pid
    }

    /// Alive and not a zombie (nothing may reap it: it is not our child).
    var isRunning: Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        return !stat[stat.index(after: close)...].hasPrefix(" Z")
    }

    /// `http://[user:password@]127.0.0.1:port` (or `socks5h://…`).
    func url(user: String? = nil, password: String? = nil) -> String {
        let credentials = user.map { "\($0):\(password ?? "")@" } ?? ""
        return "\(scheme)://\(credentials)127.0.0.1:\(port)"
    }

    func log() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// The CONNECT requests tinyproxy logged, e.g. `CONNECT 127.0.0.1:41234`; for danted the targets it
    /// connected to, e.g. `127.0.0.1.41234`.
    func tunnels() -> [String] {
        log().split(separator: "\n").compactMap { line in
            if let r = line.range(of: "Request (file descriptor "), let c = line.range(of: "): CONNECT ", range: r.upperBound..<line.endIndex) {
                return "CONNECT " + (line[c.upperBound...].split(separator: " ").first.map(String.init) ?? "")
            }
            if line.contains("TCP_TUNNEL") {
                // squid: "… TCP_TUNNEL/200 5321 CONNECT 127.0.0.1:41234 - HIER_DIRECT/127.0.0.1 -"
                let words = line.split(separator: " ")
                guard let c = words.firstIndex(of: "CONNECT"), c + 1 < words.count else { return nil }
                return "CONNECT \(words[c + 1])"
            }
            if line.contains("tcp/connect") {
                // "tcp/connect ]: 0 -> CLIENT PROXY -> 0, 0 -> OUT TARGET -> 0: …": the target ends the part before
                // the last "->".
                let parts = line.components(separatedBy: " -> ")
                guard parts.count >= 2 else { return nil }
                return parts[parts.count - 2].split(separator: " ").last.map(String.init)
            }
            return nil
        }
    }

    /// SIGKILL to its whole process group, then waits until it is gone.
    func stop() {
        kill(-pid, SIGKILL)
        let deadline = Date().addingTimeInterval(30)
        while isRunning, Date() < deadline { usleep(10_000) }
        dir.remove()
    }

    /// tinyproxy with `BasicAuth user password` when given; `connectPorts` empty allows CONNECT to every port
    /// (tinyproxy's own default config allows only 443 and 563).
    static func tinyproxy(basicAuth: (user: String, password: String)? = nil, connectPorts: [Int] = []) throws -> ProxyProcess {
        try start(scheme: "http", executable: "/usr/bin/tinyproxy") { dir, port in
            var conf = """
            Port \(port)
            Listen 127.0.0.1
            Timeout 60
            LogFile "\(dir)/proxy.log"
            LogLevel Connect
            MaxClients 100
            Allow 127.0.0.1

            """
            if let basicAuth { conf += "BasicAuth \(basicAuth.user) \(basicAuth.password)\n" }
            for p in connectPorts { conf += "ConnectPort \(p)\n" }
            return (conf, ["-d", "-c", "\(dir)/proxy.conf"])
        }
    }

    /// The requests nginx's access log lists for `path`: status, and the `Range`, `If-Range` and `Via` sent (nil: none).
    func nginxRequests(_ path: String) -> [(status: Int, range: String?, ifRange: String?, via: String?)] {
        logged(path).map { ($0.status, Self.field($0.line, "range"), Self.field($0.line, "validator"),
                            Self.field($0.line, "via", toEnd: true)) }
    }

    /// The access log's lines for `path` (`METHOD PATH STATUS key=value …`), with their status.
    private func logged(_ path: String) -> [(line: Substring, status: Int)] {
        log().split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", maxSplits: 3)
            guard fields.count >= 3, fields[1] == path, let status = Int(fields[2]) else { return nil }
            return (line, status)
        }
    }

    /// A `key=value` field of an access log line (nil for none, empty or `-`); `toEnd`: the rest of the line.
    private static func field(_ line: Substring, _ key: String, toEnd: Bool = false) -> String? {
        guard let r = line.range(of: " \(key)=") else { return nil }
        let rest = line[r.upperBound...]
        let text = toEnd ? String(rest) : String(rest.prefix { $0 != " " })
        return text.isEmpty || text == "-" ? nil : text
    }

    /// The plain http requests a forwarding proxy logged, as their absolute-form target: tinyproxy's
    /// `Request (file descriptor N): GET http://127.0.0.1:41234/f.bin HTTP/1.1`, squid's access log
    /// `… TCP_MISS/200 1234 GET http://127.0.0.1:41234/f.bin - …`.
    func forwarded() -> [String] {
        log().split(separator: "\n").compactMap { line -> String? in
            let words = line.split(separator: " ")
            guard let get = words.firstIndex(where: { ["GET", "HEAD", "POST", "PUT"].contains($0) }),
                  get + 1 < words.count, words[get + 1].hasPrefix("http://") else { return nil }
            return "\(words[get]) \(words[get + 1])"
        }
    }

    /// squid (Debian's `squid`) with Debian's stock configuration, only the ports, the logs and the pid file changed:
    /// `http_access deny CONNECT !SSL_ports` (443, and `sslPorts` added to `SSL_ports`), `allow localhost`. With
    /// `basicAuth`, it asks for those credentials (`basic_ncsa_auth`) before its stock rules allow anything. Its
    /// access log is `log()`.
    static func squid(sslPorts: [Int] = [], basicAuth: (user: String, password: String)? = nil) throws -> ProxyProcess {
        let stock = try String(contentsOfFile: "/etc/squid/squid.conf", encoding: .utf8)
        var hash = ""
        if let basicAuth {
            let made = try runCommand("/usr/bin/openssl", ["passwd", "-apr1", basicAuth.password])
            hash = made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return try start(scheme: "http", executable: "/usr/sbin/squid") { dir, port in
            _ = chmod(dir, 0o777) // squid started by root works as user proxy
            var lines = stock.split(separator: "\n").map(String.init).filter {
                let t = $0.trimmingCharacters(in: .whitespaces)
                return !t.isEmpty && !t.hasPrefix("#")
            }
            lines = lines.flatMap { line -> [String] in
                if line.hasPrefix("http_port ") { return ["http_port 127.0.0.1:\(port)"] }
                if line.hasPrefix("coredump_dir ") { return ["coredump_dir \(dir)"] }
                if line.hasPrefix("acl SSL_ports port 443") { return [line] + sslPorts.map { "acl SSL_ports port \($0)" } }
                if line.hasPrefix("http_access deny !Safe_ports"), let basicAuth {
                    try? "\(basicAuth.user):\(hash)\n".write(toFile: "\(dir)/passwd", atomically: true, encoding: .utf8)
                    _ = chmod("\(dir)/passwd", 0o644)
                    return ["auth_param basic program /usr/lib/squid/basic_ncsa_auth \(dir)/passwd",
                            "auth_param basic realm squid", "acl authenticated proxy_auth REQUIRED",
                            "http_access deny !authenticated", line]
                }
                return [line]
            }
            lines += ["access_log stdio:\(dir)/proxy.log", "cache_log \(dir)/cache.log", "pid_filename \(dir)/squid.pid"]
            return (lines.joined(separator: "\n") + "\n", ["-N", "-f", "\(dir)/proxy.conf"])
        }
    }

    /// danted as a SOCKS5 proxy without authentication, connecting out from 127.0.0.1.
    static func dante() throws -> ProxyProcess {
        try start(scheme: "socks5h", executable: "/usr/sbin/danted") { dir, port in
            let conf = """
            logoutput: \(dir)/proxy.log
            internal: 127.0.0.1 port = \(port)
            external: 127.0.0.1
            clientmethod: none
            socksmethod: none
            user.privileged: root
            user.unprivileged: nobody
            client pass {
                from: 127.0.0.0/8 to: 0.0.0.0/0
                log: connect disconnect error
            }
            socks pass {
                from: 127.0.0.0/8 to: 0.0.0.0/0
                command: connect
                log: connect disconnect error
            }

            """
            return (conf, ["-f", "\(dir)/proxy.conf", "-N", "1", "-p", "\(dir)/proxy.pid"])
        }
    }

    /// BusyBox httpd serving the files in `home` (Debian's `busybox`): it honours `Range` but answers 206
    /// whatever `If-Range` says, the splice case of the servers that lie. `url(...)` is its root.
    /// With `-vv` it writes each request's URL and status to its output (`busyboxResponses()`).
    static func busyboxHTTPD(home: String) throws -> ProxyProcess {
        try start(scheme: "http", executable: "/usr/bin/busybox") { _, port in
            ("", ["httpd", "-f", "-vv", "-p", "127.0.0.1:\(port)", "-h", home])
        }
    }

    /// A TCP relay to 127.0.0.1:`port` pacing what the server sends on each connection to `bytesPerSecond`
    /// (Tests/Fixtures/pacing-relay.py), for a server with no pacing of its own: requests pass unchanged, so
    /// `url()` is the server's as seen through it.
    static func pacingRelay(to port: Int, bytesPerSecond: Int) throws -> ProxyProcess {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fixtures/pacing-relay.py").path
        return try start(scheme: "http", executable: "/usr/bin/python3") { _, listen in
            ("", [script, String(listen), String(port), String(bytesPerSecond)])
        }
    }

    /// The statuses BusyBox httpd answered for `path`, in order (from its `-vv` output: `ip:port: url:/f.bin` then
    /// `ip:port: response:206`).
    func busyboxResponses(_ path: String) -> [Int] {
        let output = (try? String(contentsOfFile: dir.path + "/stdout.log", encoding: .utf8)) ?? ""
        var urlOf: [Substring: Substring] = [:]
        var statuses: [Int] = []
        for line in output.split(separator: "\n") {
            guard let mark = line.range(of: ": url:") ?? line.range(of: ": response:") else { continue }
            let client = line[..<mark.lowerBound], value = line[mark.upperBound...]
            if line[mark].hasSuffix("url:") {
                urlOf[client] = value
            } else if urlOf[client] == Substring(path), let status = Int(value) {
                statuses.append(status)
            }
        }
        return statuses
    }

    /// nginx (Debian's `nginx`) serving the files in `home`, one process (no master, so it runs as this user), with
    /// `server` directives added to its server block (e.g. `gzip on;`). Its access log (`log()`) has one line per
    /// request: `METHOD URI STATUS accept-encoding=… range=… sent=BYTES if-range=… via=…` (`via` last: it has
    /// blanks; `nginxRequests`).
    static func nginx(home: String, server: String = "") throws -> ProxyProcess {
        try start(scheme: "http", executable: "/usr/sbin/nginx") { dir, port in
            let conf = """
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(dir)/nginx.pid;
            error_log \(dir)/error.log;
            events { worker_connections 256; }
            http {
                log_format plain '$request_method $request_uri $status accept-encoding=$http_accept_encoding range=$http_range sent=$body_bytes_sent validator=$http_if_range via=$http_via';
                access_log \(dir)/proxy.log plain;
                client_body_temp_path \(dir)/body;
                proxy_temp_path \(dir)/proxy;
                fastcgi_temp_path \(dir)/fastcgi;
                uwsgi_temp_path \(dir)/uwsgi;
                scgi_temp_path \(dir)/scgi;
                default_type application/octet-stream;
                server {
                    listen 127.0.0.1:\(port);
                    root \(home);
                    \(server)
                }
            }

            """
            return (conf, ["-e", "\(dir)/error.log", "-c", "\(dir)/proxy.conf"])
        }
    }

    /// Apache httpd (Debian's `apache2`) serving the files in `home` (made readable to its user, nobody), one
    /// process (`-X`), with `directives` added (e.g. `<Location>` blocks with `AuthType Digest`). Its access log
    /// (`log()`) has one line per request: `METHOD PATH STATUS range=… auth=…` (the `Authorization` sent, `-`
    /// for none). `modules` are loaded from /usr/lib/apache2/modules (`mod_NAME.so`).
    static func apache(home: String, modules: [String] = [], directives: String = "") throws -> ProxyProcess {
        _ = chmod(home, 0o755)
        let base = ["mpm_prefork", "authn_core", "authn_file", "authz_core", "authz_user", "auth_basic", "auth_digest"]
        return try start(scheme: "http", executable: "/usr/sbin/apache2") { dir, port in
            _ = chmod(dir, 0o755)
            let loads = (base + modules).map { "LoadModule \($0)_module /usr/lib/apache2/modules/mod_\($0).so" }
                .joined(separator: "\n")
            let conf = """
            ServerRoot "\(dir)"
            ServerName 127.0.0.1
            Listen 127.0.0.1:\(port)
            PidFile \(dir)/apache.pid
            ErrorLog \(dir)/error.log
            \(loads)
            User nobody
            Group nogroup
            DocumentRoot \(home)
            LogFormat "%m %U %>s range=%{Range}i auth=%{Authorization}i" plain
            CustomLog \(dir)/proxy.log plain
            \(directives)

            """
            return (conf, ["-X", "-f", "\(dir)/proxy.conf"])
        }
    }

    /// lighttpd (Debian's `lighttpd`) serving the files in `home`, in the foreground, with `directives` added (e.g.
    /// `connection.kbytes-per-second = 4096`). Its access log (`log()`) has one line per request:
    /// `METHOD PATH STATUS range=…` (`-` for none).
    static func lighttpd(home: String, directives: String = "") throws -> ProxyProcess {
        try start(scheme: "http", executable: "/usr/sbin/lighttpd") { dir, port in
            let conf = """
            server.document-root = "\(home)"
            server.bind = "127.0.0.1"
            server.port = \(port)
            server.errorlog = "\(dir)/error.log"
            server.modules = ("mod_accesslog")
            accesslog.filename = "\(dir)/proxy.log"
            accesslog.format = "%m %U %>s range=%{Range}i"
            mimetype.assign = ("" => "application/octet-stream")
            \(directives)

            """
            return (conf, ["-D", "-f", "\(dir)/proxy.conf"])
        }
    }

    /// caddy (Debian's `caddy`) on https with `tls` (HTTP/2 through ALPN, HTTP/1.1 for clients without it), bound
    /// to 127.0.0.1: `/files/…` from `home` (its `file_server`), everything else passed to `upstream` (127.0.0.1's
    /// port, its `reverse_proxy`: a paced test origin behind caddy). Its access log (`log()`) is JSON, one line per
    /// request (`caddyRequests()`). No admin endpoint; its state stays in its directory.
    static func caddy(home: String, tls: TestOrigin.TLSFiles, upstream: Int) throws -> ProxyProcess {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/caddy") else {
            throw TestFailure("/usr/bin/caddy is missing: `make test` installs it (Makefile TEST_PACKAGES)")
        }
        return try start(scheme: "https", executable: "/usr/bin/env") { dir, port in
            let conf = """
            {
                admin off
                auto_https disable_redirects
                skip_install_trust
                storage file_system \(dir)/storage
                servers {
                    protocols h1 h2
                }
                log {
                    output file \(dir)/caddy.log
                }
            }
            https://127.0.0.1:\(port) {
                bind 127.0.0.1
                tls \(tls.certificate) \(tls.privateKey)
                handle /files/* {
                    root * \(home)
                    file_server
                }
                handle {
                    reverse_proxy 127.0.0.1:\(upstream)
                }
                log {
                    output file \(dir)/proxy.log
                    format json
                }
            }

            """
            return (conf, ["HOME=\(dir)", "XDG_CONFIG_HOME=\(dir)", "XDG_DATA_HOME=\(dir)", "/usr/bin/caddy", "run",
                           "--config", "\(dir)/proxy.conf", "--adapter", "caddyfile"])
        }
    }

    /// The requests caddy's JSON access log lists for `uri`: the protocol (`HTTP/2.0`), the client's port (one per
    /// connection), the status and the `Range` sent.
    func caddyRequests(_ uri: String) -> [(proto: String, port: String, status: Int, range: String?)] {
        log().split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let request = object["request"] as? [String: Any], request["uri"] as? String == uri,
                  let status = object["status"] as? Int else { return nil }
            let headers = request["headers"] as? [String: [String]] ?? [:]
            return (request["proto"] as? String ?? "", request["remote_port"] as? String ?? "", status, headers["Range"]?.first)
        }
    }

    /// Python's `http.server` serving the files in `home` (no `Range`, no validators but `Last-Modified`).
    static func pythonHTTPServer(home: String) throws -> ProxyProcess {
        try start(scheme: "http", executable: "/usr/bin/python3") { _, port in
            ("", ["-m", "http.server", "--bind", "127.0.0.1", "--directory", home, String(port)])
        }
    }

    /// The requests an origin's access log (nginx's, apache2's or lighttpd's as configured here) lists for `path`:
    /// their status and `Range` (nil when none was sent).
    func requests(_ path: String) -> [(status: Int, range: String?)] {
        logged(path).map { ($0.status, Self.field($0.line, "range")) }
    }

    /// Starts the proxy on a port the kernel just handed out; if another process took it meanwhile (the proxy
    /// exits), tries again with a new one.
    private static func start(scheme: String, executable: String,
                              config: (_ dir: String, _ port: Int) -> (text: String, arguments: [String])) throws -> ProxyProcess {
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw TestFailure("\(executable) is missing: `make test` installs it (Makefile TEST_PACKAGES)")
        }
        var lastLog = ""
        for _ in 0..<5 {
            let dir = try TempDir()
            let port = try freeLoopbackPort()
            let (text, arguments) = config(dir.path, port)
            try text.write(toFile: dir.path + "/proxy.conf", atomically: true, encoding: .utf8)
            // Started by a shell in the background, in a process group of its own, so it is not this process's
            // child: once danted (forking helpers, dropping to user nobody) was a child of ours, Foundation's
            // Process no longer reaped the daemon after kill -9.
            let output = dir.path + "/stdout.log"
            let pidFile = dir.path + "/launched.pid"
            let command = (["setsid", executable] + arguments).map(shellQuoted).joined(separator: " ")
            try spawnAndWait("/bin/sh", ["-c", "\(command) >\(shellQuoted(output)) 2>&1 </dev/null & echo $! >\(shellQuoted(pidFile))"])
            guard let text = try? String(contentsOfFile: pidFile, encoding: .utf8),
                  let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw TestFailure("cannot start \(executable)")
            }
            let server = ProxyProcess(dir: dir, port: port, scheme: scheme, logPath: dir.path + "/proxy.log", pid: pid)
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline, server.isRunning {
                if LoopbackSocket.accepts(port: port) { return server }
                usleep(20_000)
            }
            lastLog = ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "") + server.log()
            server.stop()
        }
        throw TestFailure("\(executable) did not start listening:\n\(lastLog)")
    }
}

/// A TCP port on 127.0.0.1 nothing listens on right now.
func freeLoopbackPort() throws -> Int {
    guard let (fd, port) = LoopbackSocket.bound() else { throw TestFailure("cannot bind a socket to 127.0.0.1: \(errno)") }
    close(fd)
    return port
}

/// `text` quoted for /bin/sh.
func shellQuoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }

/// Runs `path` with `arguments` by posix_spawn (stdin, stdout and stderr /dev/null, no other descriptor
/// inherited) and waits for it: Foundation's Process would hand a background grandchild its pipes.
func spawnAndWait(_ path: String, _ arguments: [String]) throws {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    for fd in Int32(0)...2 { posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0) }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var signals = sigset_t()
    sigemptyset(&signals)
    posix_spawnattr_setsigmask(&attributes, &signals) // the test process blocks some; the proxy must not inherit that
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    defer { for a in argv { free(a) } }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, path, &actions, &attributes, argv, environ)
    guard rc == 0 else { throw TestFailure("posix_spawn \(path): \(rc)") }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
}
