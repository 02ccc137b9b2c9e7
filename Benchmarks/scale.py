#!/usr/bin/env python3
"""Scale benchmark: many suspended tasks in one daemon (issue 11's "Scale" scenario, in part).

Starts a fresh halftunesd from --bin-dir with its own socket and state directory, opens --sessions sessions,
creates --tasks suspended tasks spread over them, pipelined on one connection (--window requests in flight),
and reports the create rate of every --step tasks (the cost of one create must not grow with the number of
tasks), the daemon's anonymous memory per task, how long a restart with all of them journaled takes until
`daemon.status` answers, and how long reading every task through `task.list`'s pages takes.

    Benchmarks/scale.py --bin-dir .build/release --tasks 20000
    Benchmarks/scale.py --bin-dir .build-bench/release --tasks 20000 --json results.json

Nothing leaves 127.0.0.1: tasks point at an unused local port and are never started.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def proc_kb(pid, file, field):
    """A "Field:   123 kB" value of /proc/PID/FILE."""
    with open(f"/proc/{pid}/{file}") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def smaps_anonymous_kb(pid):
    return proc_kb(pid, "smaps_rollup", "Anonymous")


def rss_kb(pid):
    return proc_kb(pid, "status", "VmRSS")


class Connection:
    def __init__(self, path, timeout=600):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buffer = b""
        self.next_id = 1

    def send(self, method, params=None):
        request = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            request["params"] = params
        self.next_id += 1
        self.sock.sendall(json.dumps(request, separators=(",", ":")).encode() + b"\n")

    def receive(self):
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("the daemon closed the connection")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        message = json.loads(line)
        if "error" in message:
            raise RuntimeError(f"error from the daemon: {message['error']}")
        return message.get("result")

    def call(self, method, params=None):
        self.send(method, params)
        return self.receive()

    def close(self):
        self.sock.close()


class Daemon:
    def __init__(self, bin_dir, work, extra):
        self.binary = os.path.join(bin_dir, "halftunesd")
        self.work = work
        self.socket = os.path.join(work, "control.sock")
        self.args = [self.binary, "--socket", self.socket, "--state-dir", os.path.join(work, "state"),
                     "--downloads-dir", os.path.join(work, "downloads")] + extra
        os.makedirs(os.path.join(work, "downloads"), exist_ok=True)
        self.process = None

    def start(self):
        """Starts the daemon; returns seconds until `daemon.status` answered."""
        log = open(os.path.join(self.work, "daemon.log"), "ab")
        began = time.monotonic()
        self.process = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"halftunesd exited {self.process.returncode}; see {self.work}/daemon.log")
            try:
                c = Connection(self.socket, timeout=30)
                c.call("daemon.status")
                c.close()
                return time.monotonic() - began
            except (FileNotFoundError, ConnectionRefusedError):
                time.sleep(0.005)

    def stop(self, sig=signal.SIGTERM):
        if self.process and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=120)


def supports(binary, flag):
    out = subprocess.run([binary, "--help"], capture_output=True, text=True).stdout
    return flag in out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--tasks", type=int, default=20000)
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--window", type=int, default=256, help="requests in flight on the connection")
    ap.add_argument("--step", type=int, default=5000, help="report the create rate of every STEP tasks")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--keep-state", help="copy the state directory (the journal with every task) here at the end")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="htd-scale.")
    binary = os.path.join(args.bin_dir, "halftunesd")
    per_session = -(-args.tasks // args.sessions)
    extra = ["--max-tasks-per-session", str(max(per_session, 10000)),
             "--max-pending-events", str(max(4 * per_session, 100000))]
    if supports(binary, "--max-tasks-per-uid"):
        extra += ["--max-tasks-per-uid", str(max(args.tasks, 100000))]
    daemon = Daemon(args.bin_dir, work, extra)
    results = {"tasks": args.tasks, "sessions": args.sessions, "window": args.window, "steps": []}
    try:
        results["first_start_s"] = daemon.start()
        pid = daemon.process.pid
        conn = Connection(daemon.socket)
        sessions = [f"scale.{i}" for i in range(args.sessions)]
        for s in sessions:
            conn.call("session.open", {"identifier": s})
        idle_anon = smaps_anonymous_kb(pid)
        idle_rss = rss_kb(pid)

        sent = received = 0
        step_start = time.monotonic()
        began = step_start
        while received < args.tasks:
            while sent < args.tasks and sent - received < args.window:
                conn.send("task.create", {"session": sessions[sent % args.sessions],
                                          "url": f"http://127.0.0.1:9/file/{sent}", "destination": f"f{sent}"})
                sent += 1
            conn.receive()
            received += 1
            if received % args.step == 0 or received == args.tasks:
                now = time.monotonic()
                n = args.step if received % args.step == 0 else received % args.step
                rate = n / (now - step_start)
                results["steps"].append({"through": received, "seconds": now - step_start, "creates_per_s": rate})
                print(f"  tasks {received - n + 1:>7}–{received:<7} {now - step_start:8.2f} s  {rate:9.0f} creates/s",
                      flush=True)
                step_start = now
        results["create_total_s"] = time.monotonic() - began
        anon = smaps_anonymous_kb(pid)
        results["anonymous_kb_idle"] = idle_anon
        results["anonymous_kb_with_tasks"] = anon
        results["anonymous_bytes_per_task"] = (anon - idle_anon) * 1024 / args.tasks
        results["rss_kb_idle"] = idle_rss
        results["rss_kb_with_tasks"] = rss_kb(pid)

        # Every task through task.list, following nextCursor (a daemon without paging answers all at once).
        t0 = time.monotonic()
        count, pages, cursor = 0, 0, None
        while True:
            listed = conn.call("task.list", {"cursor": cursor} if cursor else {})
            count += len(listed["tasks"])
            pages += 1
            cursor = listed.get("nextCursor")
            if not cursor:
                break
        results["task_list_s"] = time.monotonic() - t0
        results["task_list_count"] = count
        results["task_list_pages"] = pages
        conn.close()

        daemon.stop(signal.SIGKILL)
        results["restart_until_status_s"] = daemon.start()
    finally:
        daemon.stop()
        if args.keep_state:
            shutil.copytree(os.path.join(work, "state"), args.keep_state, dirs_exist_ok=True)
        shutil.rmtree(work, ignore_errors=True)

    print(f"  {args.tasks} tasks in {results['create_total_s']:.2f} s; anonymous memory "
          f"{results['anonymous_kb_idle'] / 1024:.1f} → {results['anonymous_kb_with_tasks'] / 1024:.1f} MiB "
          f"({results['anonymous_bytes_per_task']:.0f} B per task); task.list of {results['task_list_count']} "
          f"in {results['task_list_pages']} pages, {results['task_list_s']:.2f} s; restart after kill -9 answered daemon.status in "
          f"{results['restart_until_status_s']:.2f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
