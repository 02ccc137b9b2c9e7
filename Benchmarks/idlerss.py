#!/usr/bin/env python3
"""What an idle daemon holds (issue 55): halftunesd and aria2c --enable-rpc side by side, each started fresh with
an empty state, one session (halftunesd) and one paused download (both) added, then left idle. Reported after
--seconds of idleness: RSS (VmRSS: every page mapped, the binary's and libraries' code included) and the
anonymous memory (smaps_rollup `Anonymous`: heap, stacks; what no file backs).

    Benchmarks/idlerss.py --bin-dir .build-bench/release [--seconds 5] [--json out.json]
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from controlplane import Aria2, aria2_rpc  # noqa: E402
from scale import Connection, Daemon, rss_kb, smaps_anonymous_kb  # noqa: E402

URL = "http://127.0.0.1:9/idle.bin"  # never fetched: the task stays paused


def held(pid, seconds):
    time.sleep(seconds)
    return {"rssKB": rss_kb(pid), "anonymousKB": smaps_anonymous_kb(pid)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="htd-idlerss-")
    results = {}
    try:
        daemon = Daemon(args.bin_dir, os.path.join(work, "htd"), [])
        os.makedirs(daemon.work, exist_ok=True)
        daemon.start()
        try:
            c = Connection(daemon.socket)
            c.call("session.open", {"identifier": "idle"})
            c.call("task.create", {"session": "idle", "url": URL, "destination": "idle.bin"})
            c.close()
            results["halftunesd"] = held(daemon.process.pid, args.seconds)
        finally:
            daemon.stop()
        if shutil.which("aria2c"):
            with aria2_rpc(work, 1) as (process, port):
                Aria2(port).call("aria2.addUri", [[URL], {"pause": "true", "out": "idle.bin"}])
                results["aria2c"] = held(process.pid, args.seconds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for tool, r in results.items():
        print(f"{tool:<12} RSS {r['rssKB'] / 1024:6.1f} MB   anonymous {r['anonymousKB'] / 1024:6.1f} MB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seconds": args.seconds, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
