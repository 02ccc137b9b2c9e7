#!/usr/bin/env python3
"""What each control call costs (issue 28): the daemon's CPU per call and the round trip, method by method, one
client calling one method N times in a row; side by side with aria2c's JSON-RPC doing the same.

One nginx of its own on 127.0.0.1 serves a file paced per connection, and each tool runs one paced download in its
only transfer slot (halftunesd --max-concurrent 1, aria2c -j 1), so a resumed task only queues and the numbers are
the control plane's, not a transfer's. A subscriber drains the session's events throughout (halftunesd), as an
app would. For each method: CPU microseconds the daemon process used per call (/proc/PID/stat, its threads
included) and the bytes it wrote per call (/proc/PID/io; the paced download's share of both is measured
while idle and taken off) and the p50/p99 round trip.

  halftunesd: task.create (suspended) · task.get · task.list (50) · task.resume (queues) · task.suspend ·
              daemon.status · task.cancel
  aria2c:     aria2.addUri (paused) · aria2.tellStatus · aria2.tellWaiting (0, 50) · aria2.unpause (queues) ·
              aria2.forcePause · aria2.getGlobalStat · aria2.forceRemove

Also, halftunesd only, "resume + suspend (a transfer)": with a free slot, what one resume that starts a transfer
and the suspend that stops it cost together (the transfer's first burst downloaded, fsynced and journaled) — the
work the issue's load adds for halftunesd and not for aria2c (controlplane.py).

    Benchmarks/callcost.py --bin-dir .build-bench/release [--calls 2000] [--json out.json]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from controlplane import Aria2, add_common_arguments, aria2_rpc, drain_events, percentile, side_by_side, wait_until  # noqa: E402
from scale import Connection, Daemon  # noqa: E402
from smallfiles import cpu_seconds  # noqa: E402


def idle_rates(pid, seconds=1.0):
    """CPU seconds and bytes written per second the process uses with no calls (its paced download, timers)."""
    before, written, began = cpu_seconds(pid), write_bytes(pid), time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - began
    return (cpu_seconds(pid) - before) / elapsed, (write_bytes(pid) - written) / elapsed


def write_bytes(pid):
    """What the process wrote to storage so far (/proc/PID/io `write_bytes`: the page cache's writeback of its
    files counts, WAL checkpoints included; needs the same uid or root)."""
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    return 0


def measure(pid, name, items, call, idle):
    """Calls `call(item)` for each item; returns the daemon's CPU per call (µs) and the bytes it wrote per call
    (each with the idle share taken off), and the latencies."""
    idle_rate, idle_write_rate = idle
    latencies = []
    written_before = write_bytes(pid)
    cpu_before, wall_before = cpu_seconds(pid), time.monotonic()
    results = []
    for item in items:
        began = time.perf_counter()
        results.append(call(item))
        latencies.append(time.perf_counter() - began)
    wall = time.monotonic() - wall_before
    cpu = max(0.0, cpu_seconds(pid) - cpu_before - idle_rate * wall)
    written = max(0.0, write_bytes(pid) - written_before - idle_write_rate * wall)
    row = {"method": name, "calls": len(items), "cpuMicrosPerCall": cpu / len(items) * 1e6,
           "writtenKiBPerCall": written / len(items) / 1024,
           "p50ms": percentile(latencies, 0.5) * 1000, "p99ms": percentile(latencies, 0.99) * 1000}
    return row, results


def run_halftunesd(bin_dir, work, url, args):
    daemon = Daemon(bin_dir, work, ["--max-concurrent", "1", "--max-connections-per-host", "100"])
    daemon.start()
    rows = []
    try:
        pid = daemon.process.pid
        c = Connection(daemon.socket)
        c.call("session.open", {"identifier": "bulk"})
        c.call("task.create", {"session": "bulk", "url": url, "destination": "bulk.bin", "start": True})
        wait_until(lambda: c.call("daemon.status")["tasks"].get("running", 0) >= 1, "the paced download")
        c.call("session.open", {"identifier": "cost"})
        stop = drain_events(daemon.socket, "cost")
        idle = idle_rates(pid)
        n = range(args.calls)
        row, created = measure(pid, "task.create (suspended)", n, lambda i: c.call(
            "task.create", {"session": "cost", "url": url, "destination": f"c{i}.bin"})["id"], idle)
        rows.append(row)
        rows.append(measure(pid, "task.get", created, lambda i: c.call("task.get", {"id": i}), idle)[0])
        rows.append(measure(pid, "task.list (50)", n, lambda _: c.call("task.list", {"session": "cost", "limit": 50}), idle)[0])
        rows.append(measure(pid, "task.resume (queues)", created, lambda i: c.call("task.resume", {"id": i}), idle)[0])
        rows.append(measure(pid, "task.suspend", created, lambda i: c.call("task.suspend", {"id": i}), idle)[0])
        rows.append(measure(pid, "daemon.status", n, lambda _: c.call("daemon.status"), idle)[0])
        rows.append(measure(pid, "task.cancel", created, lambda i: c.call("task.cancel", {"id": i}), idle)[0])
        # With a free slot: a resume that starts a transfer and the suspend that stops it, as one pair.
        c.call("daemon.setLimits", {"maxConcurrent": 2})
        pairs = [c.call("task.create", {"session": "cost", "url": url, "destination": f"t{i}.bin"})["id"]
                 for i in range(args.transfers)]
        row, _ = measure(pid, "resume + suspend (a transfer)", pairs,
                         lambda i: (c.call("task.resume", {"id": i}), c.call("task.suspend", {"id": i})), idle)
        rows.append(row)
        for i in pairs:
            c.call("task.cancel", {"id": i})
        stop.set()
    finally:
        daemon.stop()
    return rows


def run_aria2(work, url, args):
    rows = []
    with aria2_rpc(work, 1) as (process, port):
        pid = process.pid
        c = Aria2(port)
        c.call("aria2.addUri", [[url], {"out": "bulk.bin"}])
        wait_until(lambda: int(c.call("aria2.getGlobalStat")["numActive"]) >= 1, "the paced download")
        idle = idle_rates(pid)
        n = range(args.calls)
        row, gids = measure(pid, "aria2.addUri (paused)", n, lambda i: c.call(
            "aria2.addUri", [[url], {"pause": "true", "out": f"c{i}.bin"}]), idle)
        rows.append(row)
        rows.append(measure(pid, "aria2.tellStatus", gids, lambda g: c.call("aria2.tellStatus", [g]), idle)[0])
        rows.append(measure(pid, "aria2.tellWaiting (0, 50)", n, lambda _: c.call("aria2.tellWaiting", [0, 50]), idle)[0])
        rows.append(measure(pid, "aria2.unpause (queues)", gids, lambda g: c.call("aria2.unpause", [g]), idle)[0])
        rows.append(measure(pid, "aria2.forcePause", gids, lambda g: c.call("aria2.forcePause", [g]), idle)[0])
        rows.append(measure(pid, "aria2.getGlobalStat", n, lambda _: c.call("aria2.getGlobalStat"), idle)[0])
        rows.append(measure(pid, "aria2.forceRemove", gids, lambda g: c.call("aria2.forceRemove", [g]), idle)[0])
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser)
    parser.add_argument("--calls", type=int, default=2000, help="calls of each method")
    parser.add_argument("--transfers", type=int, default=200, help="resume + suspend pairs that start a transfer")
    args = parser.parse_args()
    results = side_by_side(args, "htd-callcost-", run_halftunesd, run_aria2)
    print(f"{'tool':<12}{'method':<34}{'calls':>7}{'CPU/call':>12}{'written/call':>15}{'p50':>10}{'p99':>10}")
    for tool, rows in results.items():
        for r in rows:
            print(f"{tool:<12}{r['method']:<34}{r['calls']:>7}{r['cpuMicrosPerCall']:>9.0f} µs"
                  f"{r['writtenKiBPerCall']:>11.1f} KiB{r['p50ms']:>8.2f}ms{r['p99ms']:>8.2f}ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"calls": args.calls, "transfers": args.transfers, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
