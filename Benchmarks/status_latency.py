#!/usr/bin/env python3
"""Status latency benchmark (issue 11): how fast the daemon answers while 100 transfers run, next to aria2c.

Serves one file from an nginx of its own on 127.0.0.1, paced per connection (`limit_rate`, so every transfer
keeps running for the whole measurement), then, one tool after the other:
  halftunesd (max-concurrent 100, 100 per host): 100 downloads of it, and once all 100 run and bytes flow,
             --samples `daemon.status` round trips one after another on one connection of the control socket;
  aria2c --enable-rpc (-j100): the same 100 downloads, and --samples `aria2.getGlobalStat` round trips on one
             kept-alive HTTP connection to its JSON-RPC port (the peer's equivalent of daemon.status).
Reports p50, p99 and the worst round trip of each. Needs nginx and aria2c (`apt-get install nginx aria2`).

    Benchmarks/status_latency.py --bin-dir .build/release
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale import Connection, Daemon  # noqa: E402
from smallfiles import free_port, start_nginx, stop_nginx  # noqa: E402

TRANSFERS = 100


def percentiles(samples):
    s = sorted(samples)
    return {"p50_ms": s[len(s) // 2] * 1000, "p99_ms": s[min(len(s) - 1, int(len(s) * 0.99))] * 1000,
            "max_ms": s[-1] * 1000, "samples": len(s)}


def measure(call, samples):
    times = []
    for _ in range(samples):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return percentiles(times)


def run_daemon(bin_dir, work, urls, samples, settle):
    state = os.path.join(work, "daemon")
    os.makedirs(state)
    out = os.path.join(work, "daemon-out")
    os.makedirs(out)
    daemon = Daemon(bin_dir, state, ["--max-concurrent", str(TRANSFERS),
                                     "--max-connections-per-host", str(TRANSFERS)])
    daemon.start()
    try:
        conn = Connection(daemon.socket)
        conn.call("session.open", {"identifier": "latency"})
        for i, url in enumerate(urls):
            conn.call("task.create", {"session": "latency", "url": url, "destination": os.path.join(out, f"d{i}"),
                                      "start": True})
        deadline = time.monotonic() + 60
        while True:
            status = conn.call("daemon.status")
            if status["tasks"].get("running", 0) == TRANSFERS:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the transfers did not all start: {status['tasks']}")
            time.sleep(0.05)
        time.sleep(settle)  # every transfer past its start, bytes flowing
        result = measure(lambda: conn.call("daemon.status"), samples)
        status = conn.call("daemon.status")
        result["running_after"] = status["tasks"].get("running", 0)
        conn.close()
        return result
    finally:
        daemon.stop()


def run_aria2(work, urls, samples, settle):
    out = os.path.join(work, "aria2-out")
    os.makedirs(out)
    port = free_port()
    process = subprocess.Popen(["aria2c", "--enable-rpc", f"--rpc-listen-port={port}", f"-j{TRANSFERS}",
                                "--max-connection-per-server=1", "--split=1", "--file-allocation=none",
                                "-d", out, "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        http_conn = None
        for _ in range(200):
            try:
                http_conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                http_conn.connect()
                break
            except OSError:
                time.sleep(0.05)

        def rpc(method, params=None):
            body = json.dumps({"jsonrpc": "2.0", "id": "1", "method": method, "params": params or []})
            http_conn.request("POST", "/jsonrpc", body, {"Content-Type": "application/json"})
            answer = json.loads(http_conn.getresponse().read())
            if "error" in answer:
                raise RuntimeError(f"aria2c: {answer['error']}")
            return answer["result"]

        for i, url in enumerate(urls):
            rpc("aria2.addUri", [[url], {"out": f"a{i}"}])
        deadline = time.monotonic() + 60
        while int(rpc("aria2.getGlobalStat")["numActive"]) < TRANSFERS:
            if time.monotonic() > deadline:
                raise RuntimeError("aria2c did not start every transfer")
            time.sleep(0.05)
        time.sleep(settle)
        result = measure(lambda: rpc("aria2.getGlobalStat"), samples)
        result["running_after"] = int(rpc("aria2.getGlobalStat")["numActive"])
        http_conn.close()
        return result
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--rate", default="512k", help="nginx limit_rate per connection")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds of transfer before measuring")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    if not shutil.which("aria2c"):
        sys.exit("status_latency: aria2c is missing (apt-get install aria2)")
    work = tempfile.mkdtemp(prefix="htd-latency.")
    os.chmod(work, 0o755)
    nginx = None
    results = {"transfers": TRANSFERS, "rate": args.rate}
    try:
        www = os.path.join(work, "www")
        os.makedirs(www)
        with open(os.path.join(www, "big.bin"), "wb") as f:
            f.write(os.urandom(1 << 20) * 256)  # 256 MiB: at the paced rate no transfer ends while measuring
        port = free_port()
        nginx = start_nginx(work, port, limit_rate=args.rate, connections=4096)
        urls = [f"http://127.0.0.1:{port}/big.bin?{i}" for i in range(TRANSFERS)]
        for tool, run in (("halftunesd", lambda: run_daemon(args.bin_dir, work, urls, args.samples, args.settle)),
                          ("aria2c", lambda: run_aria2(work, urls, args.samples, args.settle))):
            r = run()
            results[tool] = r
            print(f"  {tool:<10} {r['samples']} round trips with {r['running_after']} transfers running: "
                  f"p50 {r['p50_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms  max {r['max_ms']:.3f} ms", flush=True)
    finally:
        stop_nginx(nginx)
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
