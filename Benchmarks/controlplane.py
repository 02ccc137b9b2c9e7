#!/usr/bin/env python3
"""Control-plane load benchmark (issue 28): how many calls a second the daemon answers, and how fast
`daemon.status` stays, while clients hammer it and downloads run; side by side with aria2c's JSON-RPC.

One nginx of its own on 127.0.0.1 serves a file paced per connection (`limit_rate`), so the --transfers
background downloads keep running for the whole measurement. Then, for each tool in turn:
  halftunesd: --transfers downloads in a session of their own; --clients client processes, each with its own
              session, its own control connection and a subscriber connection draining that session's events,
              loop task.create (suspended) / task.resume / task.suspend / task.get / task.list (50) /
              task.cancel; a probe process times `daemon.status` round trips on a connection of its own, one
              every 5 ms.
  aria2c --enable-rpc: the same downloads; the same clients, each on one kept-alive HTTP connection, loop
              aria2.addUri (paused) / aria2.unpause / aria2.forcePause / aria2.tellStatus / aria2.tellWaiting
              (0, 50) / aria2.forceRemove; the probe times aria2.getGlobalStat.
Reports calls per second (all clients together), the probe's p50/p99/worst, the CPU the daemon used (cores: CPU
seconds / wall seconds) and what it wrote to disk meanwhile (/proc/PID/io write_bytes). Needs nginx and aria2c
(`apt-get install nginx aria2`).

`--slots N` gives both tools N transfer slots (halftunesd --max-concurrent, aria2c -j). By default N = --transfers,
the load issue 28 describes: the 20 paced downloads run and hold every slot, so a resumed task only queues and
both tools do the same work, the control plane's. With more slots than downloads (`--slots 100`) the two do not
do the same work: halftunesd starts a resumed task's transfer at once, so every resume downloads what nginx
sends before the suspend (its first burst, up to --rate bytes) and makes it durable; aria2c starts an unpaused
download on a later turn of its loop, after the forcePause that follows, and downloads nothing.

    Benchmarks/controlplane.py --bin-dir .build/release
    Benchmarks/controlplane.py --bin-dir .build-bench/release --clients 24 --seconds 20 --json out.json
"""
import argparse
import contextlib
import http.client
import json
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale import Connection, Daemon  # noqa: E402
from smallfiles import cpu_seconds, free_port, start_nginx, stop_nginx  # noqa: E402


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))] if ordered else float("nan")


# --- halftunesd -----------------------------------------------------------------------------------------------

def drain_events(socket_path, session):
    """A subscriber of `session` on a connection of its own that reads every event, as an app would, on a thread
    until the returned event is set."""
    events = Connection(socket_path)
    events.send("events.subscribe", {"session": session, "after": 0})
    stop = threading.Event()

    def drain():
        try:
            while not stop.is_set():
                events.receive()
        except Exception:
            pass
    threading.Thread(target=drain, daemon=True).start()
    return stop


def halftunesd_client(socket_path, index, url, seconds, start_at, results):
    session = f"cp-{index}"
    c = Connection(socket_path)
    c.call("session.open", {"identifier": session})
    stop = drain_events(socket_path, session)
    while time.time() < start_at:
        time.sleep(0.001)
    calls, n, end = 0, 0, start_at + seconds
    while time.time() < end:
        n += 1
        task = c.call("task.create", {"session": session, "url": url, "destination": f"c{index}-{n}.bin"})
        tid = task["id"]
        c.call("task.resume", {"id": tid})
        c.call("task.suspend", {"id": tid})
        c.call("task.get", {"id": tid})
        c.call("task.list", {"session": session, "limit": 50})
        c.call("task.cancel", {"id": tid})
        calls += 6
        if n % 20 == 0:  # acknowledge what was delivered, so the session's event cap is never reached
            c.call("events.ack", {"session": session, "through": c.call("session.open", {"identifier": session})["session"]["lastEventSeq"]})
            calls += 2
    stop.set()
    results.put(("calls", calls))


def probe(call, seconds, start_at, results):
    """Times `call()` (one status round trip) every 5 ms from `start_at` for `seconds`."""
    while time.time() < start_at:
        time.sleep(0.001)
    samples, end = [], start_at + seconds
    while time.time() < end:
        began = time.perf_counter()
        call()
        samples.append(time.perf_counter() - began)
        time.sleep(0.005)
    results.put(("probe", samples))


def halftunesd_probe(socket_path, seconds, start_at, results):
    c = Connection(socket_path)
    probe(lambda: c.call("daemon.status"), seconds, start_at, results)


def run_halftunesd(bin_dir, work, url, args):
    daemon = Daemon(bin_dir, work, ["--max-concurrent", str(args.slots), "--max-connections-per-host", "100"])
    daemon.start()
    try:
        c = Connection(daemon.socket)
        c.call("session.open", {"identifier": "bulk"})
        for i in range(args.transfers):
            c.call("task.create", {"session": "bulk", "url": url, "destination": f"bulk-{i}.bin", "start": True})
        wait_until(lambda: c.call("daemon.status")["tasks"].get("running", 0) >= args.transfers, "bulk transfers")
        result = measure(daemon.process.pid, args,
                         lambda i, start, q: halftunesd_client(daemon.socket, i, url, args.seconds, start, q),
                         lambda start, q: halftunesd_probe(daemon.socket, args.seconds, start, q))
    finally:
        daemon.stop()
    # The journal's own count, logged at shutdown (the whole run, set-up included): how well it gathers writes.
    with open(os.path.join(work, "daemon.log"), errors="replace") as f:
        for line in f:
            found = re.search(r"journalTransactions=(\d+).*journalWrites=(\d+)", line)
            if found:
                result["journalTransactions"], result["journalWrites"] = int(found[1]), int(found[2])
    return result


# --- aria2c ---------------------------------------------------------------------------------------------------

class Aria2:
    def __init__(self, port):
        self.http = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.next_id = 0

    def call(self, method, params=None):
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": str(self.next_id), "method": method, "params": params or []})
        self.http.request("POST", "/jsonrpc", body, {"Content-Type": "application/json"})
        answer = json.loads(self.http.getresponse().read())
        if "error" in answer:
            raise RuntimeError(f"aria2c: {answer['error']}")
        return answer["result"]


def aria2_client(port, index, url, seconds, start_at, results):
    c = Aria2(port)
    while time.time() < start_at:
        time.sleep(0.001)
    calls, n, end = 0, 0, start_at + seconds
    while time.time() < end:
        n += 1
        gid = c.call("aria2.addUri", [[url], {"pause": "true", "out": f"c{index}-{n}.bin"}])
        c.call("aria2.unpause", [gid])
        c.call("aria2.forcePause", [gid])
        c.call("aria2.tellStatus", [gid])
        c.call("aria2.tellWaiting", [0, 50])
        c.call("aria2.forceRemove", [gid])
        calls += 6
    results.put(("calls", calls))


def aria2_probe(port, seconds, start_at, results):
    c = Aria2(port)
    probe(lambda: c.call("aria2.getGlobalStat"), seconds, start_at, results)


@contextlib.contextmanager
def aria2_rpc(work, jobs):
    """aria2c with its JSON-RPC on a free 127.0.0.1 port, `jobs` downloads at once (one connection each) into
    work/aria2; yields (process, port) once the port answers, and stops it afterwards."""
    port = free_port()
    out = os.path.join(work, "aria2")
    os.makedirs(out, exist_ok=True)
    process = subprocess.Popen(["aria2c", "--enable-rpc", f"--rpc-listen-port={port}", "--rpc-listen-all=false",
                                "-j", str(jobs), "--max-connection-per-server=1", "--split=1", f"--dir={out}",
                                "--allow-overwrite=true", "--auto-file-renaming=false", "--file-allocation=none",
                                "--max-download-result=100", "--quiet"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: port_open(port), "aria2c's RPC port")
        yield process, port
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)


def run_aria2(work, url, args):
    with aria2_rpc(work, args.slots) as (process, port):
        c = Aria2(port)
        for i in range(args.transfers):
            c.call("aria2.addUri", [[url], {"out": f"bulk-{i}.bin"}])
        wait_until(lambda: int(c.call("aria2.getGlobalStat")["numActive"]) >= args.transfers, "bulk transfers")
        return measure(process.pid, args,
                       lambda i, start, q: aria2_client(port, i, url, args.seconds, start, q),
                       lambda start, q: aria2_probe(port, args.seconds, start, q))


# --- both -----------------------------------------------------------------------------------------------------

def port_open(port):
    import socket
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def wait_until(condition, what, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def written_bytes(pid):
    """Bytes the process caused to be written to storage so far (its threads included)."""
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    return 0


def measure(pid, args, client, probe):
    results = multiprocessing.Queue()
    start_at = time.time() + 2  # every process connected and set up before the clock starts
    processes = [multiprocessing.Process(target=client, args=(i, start_at, results)) for i in range(args.clients)]
    processes.append(multiprocessing.Process(target=probe, args=(start_at, results)))
    for p in processes:
        p.start()
    while time.time() < start_at:
        time.sleep(0.001)
    cpu_before, wall_before, written_before = cpu_seconds(pid), time.monotonic(), written_bytes(pid)
    calls, samples = 0, []
    for _ in processes:
        kind, value = results.get(timeout=args.seconds + 120)
        if kind == "calls":
            calls += value
        else:
            samples = value
    cpu, wall = cpu_seconds(pid) - cpu_before, time.monotonic() - wall_before
    written = written_bytes(pid) - written_before
    for p in processes:
        p.join()
    return {"callsPerSecond": calls / args.seconds, "calls": calls,
            "probeP50ms": percentile(samples, 0.5) * 1000, "probeP99ms": percentile(samples, 0.99) * 1000,
            "probeMaxms": max(samples) * 1000 if samples else float("nan"), "probeSamples": len(samples),
            "cores": cpu / wall, "writtenMiB": written / (1 << 20)}


def paced_origin(work, rate):
    """An nginx of its own in `work` serving a sparse 1 GiB file paced per connection; returns (nginx, url)."""
    os.chmod(work, 0o755)  # nginx's workers (nobody) read the file
    os.makedirs(os.path.join(work, "www"))
    with open(os.path.join(work, "www", "file.bin"), "wb") as f:
        f.truncate(1 << 30)  # sparse: 1 GiB at --rate lasts far longer than the measurement
    port = free_port()
    return start_nginx(work, port, limit_rate=rate), f"http://127.0.0.1:{port}/file.bin"


def add_common_arguments(parser):
    """The options every side-by-side control benchmark takes (this one and callcost.py)."""
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--rate", default="256k", help="nginx limit_rate per connection")
    parser.add_argument("--no-aria2", action="store_true")
    parser.add_argument("--json")


def side_by_side(args, prefix, halftunesd, aria2):
    """Runs `halftunesd(bin_dir, work, url, args)` and then (unless --no-aria2, or aria2c is missing)
    `aria2(work, url, args)` against one paced origin in a temporary directory removed afterwards."""
    work = tempfile.mkdtemp(prefix=prefix)
    nginx = None
    try:
        nginx, url = paced_origin(work, args.rate)
        results = {"halftunesd": halftunesd(args.bin_dir, os.path.join(work, "htd"), url, args)}
        if not args.no_aria2 and shutil.which("aria2c"):
            results["aria2c"] = aria2(work, url, args)
        return results
    finally:
        stop_nginx(nginx)
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser)
    parser.add_argument("--clients", type=int, default=24)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--transfers", type=int, default=20)
    parser.add_argument("--slots", type=int, help="transfer slots of both tools (default: --transfers, so resumed "
                        "tasks only queue; more: every resume also starts a transfer in halftunesd)")
    args = parser.parse_args()
    if args.slots is None:
        args.slots = args.transfers
    results = side_by_side(args, "htd-controlplane-", run_halftunesd, run_aria2)
    print(f"{'tool':<12}{'calls/s':>10}{'status p50':>12}{'p99':>10}{'max':>10}{'cores':>8}{'written':>12}")
    for tool, r in results.items():
        print(f"{tool:<12}{r['callsPerSecond']:>10.0f}{r['probeP50ms']:>10.1f}ms{r['probeP99ms']:>8.1f}ms"
              f"{r['probeMaxms']:>8.1f}ms{r['cores']:>8.2f}{r['writtenMiB']:>8.0f} MiB")
    if "journalTransactions" in results["halftunesd"]:
        r = results["halftunesd"]
        print(f"halftunesd's journal: {r['journalWrites']} writes in {r['journalTransactions']} transactions")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"clients": args.clients, "seconds": args.seconds, "transfers": args.transfers, "slots": args.slots,
                       "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
