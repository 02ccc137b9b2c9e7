#!/usr/bin/env python3
"""Segmented downloads side by side with the tools a user would pick instead, in one run (issue 12).

1. `limited`: SIZE (default 256 MiB) from nginx with `limit_rate 16m` (a pace per connection, as many real
   servers have): `curl -o`, `aria2c -x4 -s4 -k1M` and halftunesd with default settings, alternated.
2. `unthrottled`: BIG (default 1 GiB) from nginx at full speed: `curl -o` and halftunesd, alternated (wall and
   CPU; the daemon's file is fsynced before it completes, curl's is not).
3. `kill9`: halftunesd downloads SIZE under `limit_rate 16m`, is killed with SIGKILL once a third is received,
   restarts and completes; the bytes nginx sent beyond the file's size are what was fetched twice, shown per
   connection that was running at the kill (each should re-fetch at most about 1 s of its transfer).

Every download's SHA-256 is checked. Prints a Markdown table; with --doc, puts it in docs/benchmarks.md between
its own markers. Needs nginx, curl and aria2c (Debian packages) and release binaries (--bin-dir).
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from smallfiles import start_nginx, stop_nginx  # noqa: E402

BEGIN = "<!-- BEGIN SEGMENTED: written by Benchmarks/segmented.py --doc, replaced on every run -->"
END = "<!-- END SEGMENTED -->"
MiB = 1 << 20


def log(message):
    print(f"==> {message}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def timed(argv, env=None):
    """Runs argv to its end: (wall s, user+sys s of argv and its children)."""
    began = time.monotonic()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - began
    if status != 0:
        raise RuntimeError(f"{argv[0]} failed ({status}): {process.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Daemon:
    """A halftunesd of its own (default settings) under `root`."""

    def __init__(self, bin_dir, root):
        self.bin_dir = bin_dir
        self.root = root
        self.socket = os.path.join(root, "ctl.sock")
        self.state = os.path.join(root, "state")
        self.downloads = os.path.join(root, "downloads")
        self.env = dict(os.environ, HALFTUNES_SOCKET=self.socket)
        self.process = None
        os.makedirs(self.state, exist_ok=True)
        os.makedirs(self.downloads, exist_ok=True)

    def start(self):
        self.log = open(os.path.join(self.root, "daemon.log"), "ab")
        self.process = subprocess.Popen(
            [os.path.join(self.bin_dir, "halftunesd"), "--socket", self.socket, "--state-dir", self.state,
             "--downloads-dir", self.downloads, "--log-level", "warning"], stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(1200):
            if self.process.poll() is not None:
                raise RuntimeError(f"halftunesd exited with {self.process.returncode}")
            if self.ctl(["status"]).returncode == 0:
                return
            time.sleep(0.05)
        raise RuntimeError("halftunesd did not answer")

    def ctl(self, args):
        return subprocess.run([os.path.join(self.bin_dir, "halftunesctl")] + args, env=self.env,
                              capture_output=True, text=True)

    def task(self, task_id):
        out = self.ctl(["--json", "show", str(task_id)])
        return json.loads(out.stdout) if out.returncode == 0 else None

    def kill9(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=30)
        self.log.close()


class Run:
    def __init__(self, args, work):
        self.args = args
        self.work = work
        self.www = os.path.join(work, "www")

    def serve(self, size, name, limit_rate):
        """A random file of `size` bytes at /name, from an nginx with `limit_rate` (None: full speed)."""
        path = os.path.join(self.www, name)
        if not os.path.exists(path):
            with open(path, "wb") as f:
                left = size
                while left > 0:
                    n = min(left, 16 * MiB)
                    f.write(os.urandom(n))
                    left -= n
            os.chmod(path, 0o644)
        port = free_port()
        nginx = start_nginx(self.work, port, limit_rate=limit_rate)
        return nginx, f"http://127.0.0.1:{port}/{name}", sha256(path)

    def curl(self, url, digest):
        out = os.path.join(self.work, "curl.out")
        wall, cpu = timed(["curl", "-s", "-f", "-o", out, url])
        self.check(out, digest)
        return wall, cpu

    def aria2(self, url, digest):
        out_dir = os.path.join(self.work, "aria2")
        os.makedirs(out_dir, exist_ok=True)
        wall, cpu = timed(["aria2c", "-q", "-x4", "-s4", "-k1M", "--file-allocation=none", "--allow-overwrite=true",
                           "-d", out_dir, "-o", "aria2.out", url])
        self.check(os.path.join(out_dir, "aria2.out"), digest)
        return wall, cpu

    def daemon(self, url, digest, index):
        root = os.path.join(self.work, f"daemon-{index}")
        d = Daemon(self.args.bin_dir, root)
        d.start()
        try:
            dest = os.path.join(d.downloads, "file.out")
            before = cpu_seconds(d.process.pid)
            wall, ctl_cpu = timed([os.path.join(self.args.bin_dir, "halftunesctl"), "download", url,
                                   "--destination", dest, "--wait"], env=d.env)
            cpu = cpu_seconds(d.process.pid) - before + ctl_cpu
            self.check(dest, digest)
            return wall, cpu
        finally:
            d.stop()
            shutil.rmtree(root, ignore_errors=True)

    def check(self, path, digest):
        got = sha256(path)
        os.unlink(path)
        os.sync()
        if got != digest:
            raise RuntimeError(f"{path}: sha256 {got} differs from the source's {digest}")

    def alternate(self, title, url, digest, tools):
        results = {name: [] for name, _ in tools}
        for i in range(self.args.runs):
            for name, run in tools:
                wall, cpu = run(url, digest, i) if name == "halftunesd" else run(url, digest)
                results[name].append((wall, cpu))
                log(f"{title} run {i + 1}/{self.args.runs} {name:26} wall {wall:6.2f} s, cpu {cpu:5.2f} s, sha256 ok")
        return {name: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r))
                for name, r in results.items()}

    def kill9(self):
        """Bytes fetched twice when a split download is killed with SIGKILL, per running connection."""
        log_path = os.path.join(self.work, "access.log")
        size = self.args.size
        path = os.path.join(self.www, "limited.bin")
        digest = sha256(path)
        port = free_port()
        nginx = start_nginx(self.work, port, limit_rate="16m", access_log=log_path)
        url = f"http://127.0.0.1:{port}/limited.bin"
        root = os.path.join(self.work, "daemon-kill9")
        d = Daemon(self.args.bin_dir, root)
        d.start()
        try:
            dest = os.path.join(d.downloads, "file.out")
            out = d.ctl(["--json", "download", url, "--destination", dest])
            task_id = json.loads(out.stdout)["id"]
            connections = 0
            while True:
                t = d.task(task_id)
                connections = max(connections, t.get("connections") or 0)
                if t["bytesReceived"] >= size // 3:  # received, not durable: any point between checkpoints
                    connections = t.get("connections") or connections
                    break
                time.sleep(0.05)
            d.kill9()
            d.start()
            while True:
                t = d.task(task_id)
                if t["state"] == "completed":
                    break
                if t["state"] == "failed":
                    raise RuntimeError(f"the task failed after the restart: {t}")
                time.sleep(0.1)
            self.check(t["location"], digest)
        finally:
            d.stop()
            shutil.rmtree(root, ignore_errors=True)
            stop_nginx(nginx)
        sent = 0
        with open(log_path) as f:
            for line in f:
                status, body = line.split()
                if status in ("200", "206"):
                    sent += int(body)
        refetched = sent - size
        return refetched, connections


def markdown(args, limited, unthrottled, kill9):
    lines = [BEGIN, "",
             f"Segmented downloads (Benchmarks/segmented.py, medians of {args.runs} alternated runs, release binaries, "
             "nginx on 127.0.0.1, every SHA-256 checked):", "",
             "| work | tool | wall | CPU |", "|---|---|---|---|"]
    size = f"{args.size // MiB} MiB, nginx `limit_rate 16m`"
    for name, (wall, cpu) in limited.items():
        lines.append(f"| {size} | {name} | {wall:.2f} s | {cpu:.2f} s |")
    if unthrottled:
        big = f"{args.big // MiB} MiB, full speed"
        for name, (wall, cpu) in unthrottled.items():
            lines.append(f"| {big} | {name} | {wall:.2f} s | {cpu:.2f} s |")
    lines.append("")
    d, a, c = limited["halftunesd"][0], limited["aria2c -x4 -s4 -k1M"][0], limited["curl -o"][0]
    lines.append(f"Under `limit_rate 16m`: halftunesd {d / a:.2f}× aria2c's wall (target ≤ 1.0), {d / c:.2f}× curl's "
                 "(target ≤ 0.3).")
    if unthrottled:
        d, c = unthrottled["halftunesd"], unthrottled["curl -o"]
        lines.append(f"Full speed: halftunesd {d[0] / c[0]:.2f}× curl's wall (target ≤ 1.1), {d[1] / c[1]:.2f}× its CPU "
                     "(target ≤ 1.0).")
    if kill9:
        refetched, connections = kill9
        per = refetched / max(1, connections)
        lines.append(f"kill -9 with a third received: {refetched / MiB:.1f} MiB fetched twice over {connections} "
                     f"connections, {per / MiB:.1f} MiB each (≈ {per / (16 * MiB):.2f} s of one connection's 16 MiB/s).")
    lines += ["", END]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", required=True, help="release halftunesd and halftunesctl")
    ap.add_argument("--size", type=int, default=256 * MiB)
    ap.add_argument("--big", type=int, default=1024 * MiB, help="0 skips the full-speed comparison")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-kill9", action="store_true")
    ap.add_argument("--doc", action="store_true", help="write the table into docs/benchmarks.md")
    ap.add_argument("--json", help="also write the medians to this file")
    args = ap.parse_args()
    for tool in ("curl", "aria2c", "nginx"):
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            raise SystemExit(f"segmented.py: {tool} is needed (apt-get install {tool})")
    work = tempfile.mkdtemp(prefix="segmented-bench-")
    os.chmod(work, 0o755)
    os.makedirs(os.path.join(work, "www"))
    os.chmod(os.path.join(work, "www"), 0o755)
    try:
        run = Run(args, work)
        nginx, url, digest = run.serve(args.size, "limited.bin", "16m")
        try:
            limited = run.alternate("limited", url, digest, [
                ("curl -o", run.curl), ("aria2c -x4 -s4 -k1M", run.aria2), ("halftunesd", run.daemon)])
        finally:
            stop_nginx(nginx)
        unthrottled = None
        if args.big:
            nginx, url, digest = run.serve(args.big, "big.bin", None)
            try:
                unthrottled = run.alternate("full speed", url, digest, [("curl -o", run.curl), ("halftunesd", run.daemon)])
            finally:
                stop_nginx(nginx)
            os.unlink(os.path.join(work, "www", "big.bin"))
        kill9 = None if args.no_kill9 else run.kill9()
        text = markdown(args, limited, unthrottled, kill9)
        print(text)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"size": args.size, "big": args.big, "runs": args.runs,
                           "limited": {k: {"wall_s": w, "cpu_s": c} for k, (w, c) in limited.items()},
                           "full_speed": {k: {"wall_s": w, "cpu_s": c} for k, (w, c) in (unthrottled or {}).items()}},
                          f, indent=2)
        if args.doc:
            doc = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "benchmarks.md")
            with open(doc) as f:
                current = f.read()
            if BEGIN in current and END in current:
                current = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: text, current, flags=re.S)
            else:
                current = current.rstrip("\n") + "\n\n## Segmented downloads\n\n" + text + "\n"
            with open(doc, "w") as f:
                f.write(current)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
