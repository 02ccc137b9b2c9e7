#!/usr/bin/env python3
"""Measures curl vs halftunesd on one large download, `halftunesctl status` and idle RSS (run.sh calls this)."""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
SESSION = "bench"
TIME_DIR = "/tmp"  # set to the scratch directory by main()


def log(message):
    print(f"==> {message}", file=sys.stderr, flush=True)


def fail(message):
    raise SystemExit(f"bench: {message}")


def run_timed(argv, env=None, stdout=subprocess.DEVNULL, stderr=None):
    """Runs argv to its end; returns (exit code, wall s, user+sys s, max RSS bytes).

    Wall time and CPU (user+sys, argv's process and GNU time's negligible own) come from here and our wait4.
    Peak RSS comes from GNU time's wait4 on argv's process, not from ours: Linux carries the RSS high-water mark
    of the image a process exec'd from into its ru_maxrss, so a child forked from this python would report
    python's ~17 MB whenever its own peak is lower. GNU time is small enough not to distort it.
    """
    report = os.path.join(TIME_DIR, "time-report.txt")
    start = time.perf_counter()
    proc = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", report] + argv, env=env, stdout=stdout,
                            stderr=stderr)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    with open(report) as f:
        max_kb = f.read().strip().splitlines()[-1]
    os.unlink(report)
    return proc.returncode, wall, usage.ru_utime + usage.ru_stime, int(max_kb) * 1024


def proc_cpu(pid):
    """utime + stime of a process, in seconds, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        data = f.read()
    fields = data[data.rindex(")") + 2:].split()  # fields[0] is field 3 (state)
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_mem(pid, key):
    """A Vm* line of /proc/PID/status, in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    fail(f"no {key} in /proc/{pid}/status")


def sha256(path):
    out = subprocess.run(["sha256sum", path], check=True, capture_output=True, text=True).stdout
    return out.split()[0]


class Daemon:
    """One halftunesd with its own socket, state and downloads directories under `root`."""

    def __init__(self, bench, name):
        self.bench = bench
        self.root = os.path.join(bench.work, name)
        self.socket = os.path.join(self.root, "ctl.sock")
        self.downloads = os.path.join(self.root, "downloads")
        self.env = dict(os.environ, HALFTUNES_SOCKET=self.socket)
        self.proc = None
        self.log = None

    def start(self):
        os.makedirs(self.downloads)
        os.makedirs(os.path.join(self.root, "state"))
        self.log = open(os.path.join(self.root, "daemon.log"), "wb")
        self.proc = subprocess.Popen(
            [self.bench.halftunesd, "--socket", self.socket, "--state-dir", os.path.join(self.root, "state"),
             "--downloads-dir", self.downloads, "--log-level", "warning"],
            stdout=self.log, stderr=subprocess.STDOUT)
        with open(os.path.join(self.bench.work, "daemon.pids"), "a") as f:
            f.write(f"{self.proc.pid}\n")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                fail(f"halftunesd exited with {self.proc.returncode} at start: {self.log_text()}")
            if self.ctl(["status"]).returncode == 0:
                return
            time.sleep(0.05)
        fail(f"halftunesd did not answer on {self.socket} within 60 s: {self.log_text()}")

    def ctl(self, args):
        return subprocess.run([self.bench.halftunesctl] + args, env=self.env, capture_output=True, text=True)

    def log_text(self):
        self.log.flush()
        with open(os.path.join(self.root, "daemon.log"), errors="replace") as f:
            return f.read()[-4000:]

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                log(f"halftunesd {self.proc.pid} ignored SIGTERM for 20 s; killing it")
                self.proc.kill()
                self.proc.wait()
        if self.log:
            self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)


class Rpc:
    """A minimal JSON-RPC client on the control socket (one JSON object per line)."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.file = self.sock.makefile("rwb")
        self.next_id = 0

    def call(self, method, params):
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        self.file.write(line.encode() + b"\n")
        self.file.flush()
        while True:
            reply = json.loads(self.file.readline() or fail(f"the daemon closed the socket during {method}"))
            if reply.get("id") == self.next_id:
                break
        if "error" in reply:
            fail(f"{method} failed: {reply['error']}")
        return reply["result"]

    def close(self):
        self.file.close()
        self.sock.close()


class Bench:
    def __init__(self, args):
        self.args = args
        self.work = args.work
        self.halftunesd = os.path.join(args.bin_dir, "halftunesd")
        self.halftunesctl = os.path.join(args.bin_dir, "halftunesctl")
        self.expected = None

    def verify(self, path, tool):
        digest = sha256(path)
        if digest != self.expected:
            fail(f"{tool}: the downloaded file's sha256 {digest} differs from the source's {self.expected}")

    def settle(self, path):
        """Outside the timings: delete the download and write back what is dirty, so runs start alike."""
        if os.path.exists(path):
            os.unlink(path)
        os.sync()

    def run_curl(self, fsync):
        out = os.path.join(self.work, "curl.bin")
        argv = ["curl", "-s", "-f", "-o", out, self.args.url]
        if fsync:
            argv = ["sh", "-c", 'curl -s -f -o "$1" "$2" && sync "$1"', "sh", out, self.args.url]
        code, wall, cpu, rss = run_timed(argv)
        if code != 0:
            fail(f"{' '.join(argv)} exited with {code}")
        self.verify(out, "curl")
        self.settle(out)
        return {"wall": wall, "cpu": cpu, "rss": rss}

    def run_daemon(self, index):
        daemon = Daemon(self, f"daemon-run-{index}")
        try:
            daemon.start()
            pid = daemon.proc.pid
            dest = os.path.join(daemon.downloads, "big.bin")
            out_path = os.path.join(daemon.root, "ctl.out")
            before = proc_cpu(pid)
            with open(out_path, "wb") as out:
                code, wall, ctl_cpu, ctl_rss = run_timed(
                    [self.halftunesctl, "download", self.args.url, "--session", SESSION, "--destination", dest,
                     "--wait"], env=daemon.env, stdout=out, stderr=subprocess.STDOUT)
            after = proc_cpu(pid)
            hwm = proc_mem(pid, "VmHWM")
            if code != 0:
                with open(out_path, errors="replace") as f:
                    fail(f"halftunesctl download --wait exited with {code}: {f.read()[-2000:]}\n{daemon.log_text()}")
            self.verify(dest, "halftunesd")
            self.settle(dest)
            return {"wall": wall, "cpu": (after - before) + ctl_cpu, "daemon_cpu": after - before,
                    "ctl_cpu": ctl_cpu, "rss": hwm, "ctl_rss": ctl_rss}
        finally:
            daemon.stop()

    def downloads(self):
        tools = ["curl", "daemon"] + (["curl+fsync"] if self.args.with_curl_fsync else [])
        runs = {tool: [] for tool in tools}
        for i in range(1, self.args.runs + 1):
            for tool in tools:
                if tool == "daemon":
                    r = self.run_daemon(i)
                    extra = f" (daemon {r['daemon_cpu']:.2f} s + halftunesctl {r['ctl_cpu']:.3f} s)"
                else:
                    r = self.run_curl(fsync=tool == "curl+fsync")
                    extra = ""
                runs[tool].append(r)
                log(f"run {i}/{self.args.runs} {tool:10} wall {r['wall']:.3f} s, cpu {r['cpu']:.2f} s{extra}, "
                    f"peak RSS {r['rss'] / 1e6:.1f} MB, sha256 ok")
        return runs

    def status_timing(self, daemon):
        runs = self.args.status_runs
        if shutil.which("hyperfine"):
            export = os.path.join(self.work, "hyperfine.json")
            subprocess.run(["hyperfine", "-N", "--warmup", "20", "--runs", str(runs), "--export-json", export,
                            "--style", "basic", f"{self.halftunesctl} status"],
                           env=daemon.env, check=True, stdout=sys.stderr)
            with open(export) as f:
                times = json.load(f)["results"][0]["times"]
            method = f"hyperfine -N, {runs} runs after 20 warm-up runs"
        else:
            for _ in range(20):
                daemon.ctl(["status"])
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                proc = subprocess.run([self.halftunesctl, "status"], env=daemon.env, stdout=subprocess.DEVNULL)
                times.append(time.perf_counter() - start)
                if proc.returncode != 0:
                    fail(f"halftunesctl status exited with {proc.returncode}")
            method = f"python fork/exec/wait loop, {runs} runs after 20 warm-up runs"
        return {"times": times, "method": method}

    def idle(self):
        daemon = Daemon(self, "daemon-idle")
        try:
            daemon.start()
            pid = daemon.proc.pid
            result = {"rss_start": proc_mem(pid, "VmRSS")}
            result["status"] = self.status_timing(daemon)
            result["rss_after_status"] = proc_mem(pid, "VmRSS")
            if self.args.idle_tasks > 0:
                rpc = Rpc(daemon.socket)
                rpc.call("session.open", {"identifier": "bench-idle"})
                base = self.args.url.rsplit("/", 1)[0]
                for i in range(self.args.idle_tasks):
                    task = rpc.call("task.create", {"session": "bench-idle", "url": f"{base}/idle/{i}.bin",
                                                    "start": False})
                    if task["state"] != "suspended":
                        fail(f"task.create without start gave state {task['state']}")
                rpc.close()
                result["tasks"] = self.args.idle_tasks
                result["rss_tasks"] = proc_mem(pid, "VmRSS")
            result["hwm"] = proc_mem(pid, "VmHWM")
            return result
        finally:
            daemon.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--source", required=True, help="the file nginx serves (for its sha256 and size)")
    parser.add_argument("--work", required=True, help="scratch directory (removed by run.sh)")
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--status-runs", type=int, default=200)
    parser.add_argument("--idle-tasks", type=int, default=100)
    parser.add_argument("--nginx", default="nginx")
    parser.add_argument("--with-curl-fsync", action="store_true")
    parser.add_argument("--results-dir")
    parser.add_argument("--doc")
    args = parser.parse_args()
    if args.runs < 1:
        fail("RUNS must be at least 1")

    global TIME_DIR
    TIME_DIR = args.work
    bench = Bench(args)
    machine = report.machine_info(args.nginx)
    log(f"sha256 of the source ({os.path.getsize(args.source)} bytes)")
    bench.expected = sha256(args.source)
    log(f"{args.runs} alternating runs per tool")
    downloads = bench.downloads()
    log("idle daemon: RSS and halftunesctl status")
    idle = bench.idle()
    results = {"machine": machine, "bin_dir": args.bin_dir, "size": os.path.getsize(args.source), "runs": args.runs,
               "downloads": downloads, "idle": idle}
    markdown = report.render(results)
    print(markdown)
    if args.results_dir:
        os.makedirs(args.results_dir, exist_ok=True)
        stamp = machine["date"].replace(":", "").replace(" ", "-")
        with open(os.path.join(args.results_dir, f"{stamp}.json"), "w") as f:
            json.dump(results, f, indent=1)
    if args.doc:
        report.write_doc(args.doc, markdown)
        log(f"results written to {args.doc}")


if __name__ == "__main__":
    main()
