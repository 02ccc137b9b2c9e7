#!/usr/bin/env python3
"""Small-files benchmark (issue 11): many small files from nginx, 16 at a time, side by side with the peers.

Serves --files files of --size bytes from an nginx of its own on 127.0.0.1, then alternates, --runs times:
  curl --parallel --parallel-max 16 --remote-name-all   (never fsyncs)
  aria2c -j16 -i LIST --file-allocation=none           (never fsyncs)
  halftunesd, max-concurrent 16 and 16 per host: every file fsynced and published before its didComplete
and reports wall time, CPU (the daemon's own utime+stime for halftunesd) and CPU per file. Every file of
every run is compared with the source. Needs nginx, curl and aria2c (`apt-get install nginx aria2`).

    Benchmarks/smallfiles.py --bin-dir .build/release
    Benchmarks/smallfiles.py --bin-dir .build/release --files 500 --runs 1
"""
import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale import Connection, Daemon  # noqa: E402

PARALLEL = 16


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_nginx(work, port, limit_rate=None, connections=1024, access_log=None):
    """An nginx of its own serving WORK/www on 127.0.0.1:PORT (`limit_rate`: nginx's per-connection pace;
    `access_log`: a file that gets each response's status and body bytes sent)."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    root = os.path.join(work, "nginx")
    os.makedirs(os.path.join(root, "tmp"), exist_ok=True)
    conf = os.path.join(root, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections {connections}; }}
http {{
    {f"log_format sent '$status $body_bytes_sent'; access_log {access_log} sent;" if access_log else "access_log off;"}
    sendfile on;
    keepalive_timeout 65;
    keepalive_requests 100000;
    default_type application/octet-stream;
    client_body_temp_path {root}/tmp/body;
    proxy_temp_path {root}/tmp/proxy;
    fastcgi_temp_path {root}/tmp/fastcgi;
    uwsgi_temp_path {root}/tmp/uwsgi;
    scgi_temp_path {root}/tmp/scgi;
    server {{ listen 127.0.0.1:{port}; root {work}/www;{f" limit_rate {limit_rate};" if limit_rate else ""} }}
}}
""")
    process = subprocess.Popen([nginx, "-p", root, "-c", conf, "-e", os.path.join(root, "error.log")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nginx did not start")


def stop_nginx(nginx):
    """Stops an nginx `start_nginx` started (None: nothing to stop)."""
    if nginx:
        nginx.send_signal(signal.SIGTERM)
        nginx.wait()


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(argv):
    began = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - began
    if status != 0:
        raise RuntimeError(f"{argv[0]} failed ({status}): {process.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def check(directory, names, digests):
    for name in names:
        with open(os.path.join(directory, name), "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() != digests[name]:
                raise RuntimeError(f"{directory}/{name} differs from the source")


def run_daemon(bin_dir, work, urls, names, out):
    state = os.path.join(work, "daemon")
    shutil.rmtree(state, ignore_errors=True)
    os.makedirs(state)
    daemon = Daemon(bin_dir, state, ["--max-concurrent", str(PARALLEL), "--max-connections-per-host", str(PARALLEL)])
    daemon.start()
    try:
        pid = daemon.process.pid
        conn = Connection(daemon.socket)
        conn.call("session.open", {"identifier": "small"})
        cpu0 = cpu_seconds(pid)
        began = time.monotonic()
        in_flight = 0
        for url, name in zip(urls, names):
            conn.send("task.create", {"session": "small", "url": url, "destination": os.path.join(out, name),
                                      "start": True})
            in_flight += 1
            if in_flight == 256:
                conn.receive()
                in_flight -= 1
        while in_flight:
            conn.receive()
            in_flight -= 1
        while True:
            tasks = conn.call("daemon.status")["tasks"]
            if tasks.get("failed", 0) or tasks.get("canceled", 0):
                raise RuntimeError(f"tasks failed: {tasks}")
            if tasks.get("completed", 0) == len(urls):
                break
            time.sleep(0.01)
        wall = time.monotonic() - began
        cpu = cpu_seconds(pid) - cpu0
        conn.close()
        return wall, cpu
    finally:
        daemon.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--size", type=int, default=64 * 1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", help="also write every run to this file")
    args = ap.parse_args()
    for tool in ("curl", "aria2c"):
        if not shutil.which(tool):
            sys.exit(f"smallfiles: {tool} is missing (apt-get install curl aria2)")

    work = tempfile.mkdtemp(prefix="htd-small.")
    os.chmod(work, 0o755)
    nginx = None
    runs = []
    try:
        www = os.path.join(work, "www")
        os.makedirs(www)
        names, digests = [], {}
        for i in range(args.files):
            name = f"f{i:05d}.bin"
            data = os.urandom(args.size)
            with open(os.path.join(www, name), "wb") as f:
                f.write(data)
            names.append(name)
            digests[name] = hashlib.sha256(data).hexdigest()
        port = free_port()
        nginx = start_nginx(work, port)
        urls = [f"http://127.0.0.1:{port}/{name}" for name in names]
        listing = os.path.join(work, "urls.txt")
        with open(listing, "w") as f:
            f.write("\n".join(urls) + "\n")

        for run in range(1, args.runs + 1):
            for tool in ("curl", "aria2c", "halftunesd"):
                out = os.path.join(work, "out")
                shutil.rmtree(out, ignore_errors=True)
                os.makedirs(out)
                subprocess.run(["sync"])
                if tool == "curl":
                    wall, cpu = timed(["curl", "--parallel", "--parallel-max", str(PARALLEL), "-s", "-f",
                                       "--remote-name-all", "--output-dir", out] + urls)
                elif tool == "aria2c":
                    wall, cpu = timed(["aria2c", f"-j{PARALLEL}", "-i", listing, "--file-allocation=none", "-d", out,
                                       "-q", "--allow-overwrite=true", "--auto-file-renaming=false"])
                else:
                    wall, cpu = run_daemon(args.bin_dir, work, urls, names, out)
                check(out, names, digests)
                runs.append({"run": run, "tool": tool, "wall_s": wall, "cpu_s": cpu})
                print(f"  run {run} {tool:<10} wall {wall:6.2f} s  cpu {cpu:6.2f} s  "
                      f"({cpu * 1000 / args.files:.2f} ms per file)", flush=True)
    finally:
        stop_nginx(nginx)
        shutil.rmtree(work, ignore_errors=True)

    print(f"\n{args.files} files of {args.size} bytes, {PARALLEL} at a time; medians of {args.runs}:")
    for tool in ("curl", "aria2c", "halftunesd"):
        mine = sorted(r["wall_s"] for r in runs if r["tool"] == tool)
        cpus = sorted(r["cpu_s"] for r in runs if r["tool"] == tool)
        print(f"  {tool:<10} wall {mine[len(mine) // 2]:6.2f} s  cpu {cpus[len(cpus) // 2]:6.2f} s "
              f"({cpus[len(cpus) // 2] * 1000 / args.files:.2f} ms per file)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"files": args.files, "size": args.size, "runs": runs}, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
