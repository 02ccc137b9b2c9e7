#!/usr/bin/env python3
"""Retention benchmark (issue 27, point 5): does a session that has finished many tasks cost what an empty one costs?

Starts a fresh halftunesd from --bin-dir with its own socket and state directory and a small HTTP origin on
127.0.0.1 (Python's threading server, a 64-byte JSON body), then for each case:

  empty     a session with no task;
  deleted   --tasks data tasks completed and their events acknowledged, in a session with finishedTaskRetention 0
            (the sweep deletes them; the script waits until the session's counts are empty);
  kept      the same in a session with the default retention (24 h): the tasks stay, as every task did before;

and reports the journal's size on disk (journal.sqlite + -wal, after a clean stop, which checkpoints the WAL) and
how long a restart after kill -9 takes until `daemon.status` answers (median of --restarts). "deleted" should
match "empty" within noise; "kept" shows what retention saves.

    Benchmarks/retention.py --bin-dir .build/release --tasks 100000
"""
import argparse
import http.server
import json
import os
import shutil
import signal
import socketserver
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale import Connection, Daemon  # noqa: E402


class Origin(http.server.BaseHTTPRequestHandler):
    body = b'{"ok":true,"padding":"0123456789012345678901234567890123"}'
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def journal_bytes(state):
    """The journal's files (journal.sqlite, -wal, -shm) and their sizes."""
    return {n: os.path.getsize(os.path.join(state, n)) for n in sorted(os.listdir(state))
            if n.startswith("journal.sqlite") and os.path.isfile(os.path.join(state, n))}


def run_tasks(conn, session, url, count, window):
    """Creates `count` started data tasks, `window` requests in flight; waits until all completed; acknowledges."""
    sent = received = 0
    while received < count:
        while sent < count and sent - received < window:
            conn.send("task.create", {"session": session, "url": url, "kind": "data", "start": True})
            sent += 1
        conn.receive()
        received += 1
    while True:
        info = conn.call("session.list")
        counts = next(s for s in info["sessions"] if s["identifier"].endswith(session))["taskCounts"]
        if counts.get("completed", 0) + counts.get("failed", 0) >= count:
            break
        time.sleep(0.2)
    last = next(s for s in conn.call("session.list")["sessions"] if s["identifier"].endswith(session))["lastEventSeq"]
    conn.call("events.ack", {"session": session, "through": last})


def measure(daemon, restarts):
    times = []
    for _ in range(restarts):
        daemon.stop(signal.SIGKILL)
        times.append(daemon.start())
    daemon.stop(signal.SIGTERM)
    size = journal_bytes(os.path.join(daemon.work, "state"))
    daemon.start()
    return size, statistics.median(times), times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--tasks", type=int, default=100000)
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--restarts", type=int, default=3)
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--cases", default="empty,deleted,kept", help="which cases, comma-separated")
    ap.add_argument("--keep-state", help="copy each case's state directory to DIR/CASE at the end")
    args = ap.parse_args()

    server = ThreadingServer(("127.0.0.1", 0), Origin)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/api.json"
    results = {"tasks": args.tasks}
    extra = ["--max-tasks-per-session", str(max(args.tasks, 10000)), "--max-tasks-per-uid", str(max(args.tasks, 100000)),
             "--max-pending-events", str(max(4 * args.tasks, 100000)), "--max-concurrent", "32",
             "--max-connections-per-host", "32"]
    for case in args.cases.split(","):
        work = tempfile.mkdtemp(prefix=f"htd-retention-{case}.")
        daemon = Daemon(args.bin_dir, work, extra)
        try:
            daemon.start()
            conn = Connection(daemon.socket)
            retention = 0 if case == "deleted" else None
            config = {"finishedTaskRetention": retention} if retention is not None else {}
            conn.call("session.open", {"identifier": "bench", "configuration": config})
            if case != "empty":
                began = time.monotonic()
                run_tasks(conn, "bench", url, args.tasks, args.window)
                results[f"{case}_run_s"] = time.monotonic() - began
                if case == "deleted":
                    while True:  # the sweep deletes in batches
                        counts = conn.call("session.list")["sessions"][0]["taskCounts"]
                        if not counts:
                            break
                        time.sleep(0.2)
                    results["deleted_after_s"] = time.monotonic() - began
            conn.close()
            size, restart, times = measure(daemon, args.restarts)
            with open(os.path.join(work, "daemon.log"), errors="replace") as f:
                replayed = [line.strip() for line in f if "journal replayed" in line]
            results[f"{case}_replay_log"] = replayed[-1] if replayed else ""
            total = sum(size.values())
            results[f"{case}_journal_bytes"] = total
            results[f"{case}_journal_files"] = size
            results[f"{case}_restart_s"] = restart
            results[f"{case}_restarts_s"] = times
            files = ", ".join(f"{n.replace('journal.sqlite', 'db') or 'db'} {b / 1024:.0f}" for n, b in size.items())
            print(f"  {case:8} journal {total / 1024:10.0f} KiB ({files})   restart until daemon.status {restart:.3f} s "
                  f"({', '.join(f'{t:.3f}' for t in times)})\n           {results[f'{case}_replay_log']}", flush=True)
        finally:
            daemon.stop()
            if args.keep_state:
                shutil.copytree(os.path.join(work, "state"), os.path.join(args.keep_state, case), dirs_exist_ok=True)
            shutil.rmtree(work, ignore_errors=True)
    server.shutdown()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
