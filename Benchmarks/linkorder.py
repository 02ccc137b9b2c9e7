#!/usr/bin/env python3
"""Writes Sources/halftunesd/halftunesd.order: the functions a running halftunesd uses, for the linker to lay out
together (lld --symbol-ordering-file, Package.swift).

The kernel maps a binary's code in 64 KiB runs around each page it faults in (fault-around), so code used at
start, at idle and by the usual calls, when scattered over the 30 MB of .text, keeps ~15 MB of it mapped; laid out
together it is ~3 MB. This runs the release daemon under valgrind's callgrind through what a daemon does — start,
a session, downloads from a local server, task.create/resume/suspend/get/list/cancel, daemon.status, idle, SIGTERM
— and writes every function of the binary that ran, the most used first (callgrind's order). Run it again after
changes that move much code (a stale entry is skipped by the linker; code missing from the file is only laid out
elsewhere):

    make release && Benchmarks/linkorder.py --bin-dir .build/release
    rm .build/release/halftunesd && make release    # SwiftPM does not see the file as an input: relink by hand

Needs valgrind (apt-get install valgrind) and the release binary built with the Makefile's RELEASE_FLAGS.
"""
import argparse
import bisect
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale import Connection  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def wait_for(path, process, seconds):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if process.poll() is not None:
            sys.exit(f"linkorder: the daemon exited ({process.returncode}) before it listened")
        if time.monotonic() > deadline:
            sys.exit(f"linkorder: no socket at {path} after {seconds} s")
        time.sleep(0.2)


def exercise(socket_path, port):
    """What a daemon does for its users, once each at least (errors of calls that may be refused are ignored)."""
    c = Connection(socket_path)

    def call(method, params=None):
        try:
            return c.call(method, params)
        except RuntimeError:
            return None

    call("session.open", {"identifier": "order"})
    for i in range(3):
        call("task.create", {"session": "order", "url": f"http://127.0.0.1:{port}/f.bin", "destination": f"f{i}.bin",
                             "start": True})
    ids = [call("task.create", {"session": "order", "url": f"http://127.0.0.1:{port}/missing{i}",
                                "destination": f"m{i}.bin"})["id"] for i in range(5)]
    for i in ids:
        call("task.resume", {"id": i})
        call("task.suspend", {"id": i})
        call("task.get", {"id": i})
    call("task.list", {"session": "order", "limit": 50})
    call("task.list", {"session": "order", "state": "suspended"})
    call("daemon.status")
    call("task.cancel", {"id": ids[1]})
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        page = call("task.list", {"session": "order", "state": "completed"})
        if page and len(page["tasks"]) >= 3:
            break
        time.sleep(0.5)
    else:
        sys.exit("linkorder: the downloads did not complete")
    call("session.invalidate", {"identifier": "order"})
    c.close()
    time.sleep(2)  # idle: timers, housekeeping


def symbol_finder(binary):
    """addr -> the name of the function symbol at or below it (nm), or None."""
    listing = subprocess.run(["nm", "-n", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
    starts, names = [], []
    for line in listing.splitlines():
        parts = line.split(maxsplit=2)
        if len(parts) == 3 and parts[1] in "tTwW":
            starts.append(int(parts[0], 16))
            names.append(parts[2])

    def find(addr):
        i = bisect.bisect_right(starts, addr) - 1
        return names[i] if i >= 0 else None
    return find


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", default=os.path.join(ROOT, ".build/release"))
    parser.add_argument("--out", default=os.path.join(ROOT, "Sources/halftunesd/halftunesd.order"))
    args = parser.parse_args()
    for tool in ("valgrind", "callgrind_annotate", "strip"):
        if shutil.which(tool) is None:
            sys.exit(f"linkorder: {tool} is not installed (apt-get install valgrind binutils)")
    work = tempfile.mkdtemp(prefix="htd-linkorder-")
    server = daemon = None
    try:
        # valgrind 3.19 reads no DWARF 5: a copy without debug sections (the symbol table stays).
        binary = os.path.join(work, "halftunesd")
        subprocess.run(["strip", "--strip-debug", "-o", binary, os.path.join(args.bin_dir, "halftunesd")], check=True)
        www = os.path.join(work, "www")
        os.makedirs(www)
        with open(os.path.join(www, "f.bin"), "wb") as f:
            f.write(os.urandom(300_000))
        server = subprocess.Popen([sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1"], cwd=www,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        port = int(re.search(r"port (\d+)", server.stdout.readline()).group(1))
        out = os.path.join(work, "callgrind.out")
        socket_path = os.path.join(work, "control.sock")
        with open(os.path.join(work, "daemon.log"), "w") as log:
            daemon = subprocess.Popen(["valgrind", "--tool=callgrind", "--separate-threads=no", "--demangle=no",
                                       f"--callgrind-out-file={out}", binary, "--socket", socket_path,
                                       "--state-dir", os.path.join(work, "state"),
                                       "--downloads-dir", os.path.join(work, "downloads")],
                                      stdout=log, stderr=subprocess.STDOUT)
        os.makedirs(os.path.join(work, "downloads"))
        wait_for(socket_path, daemon, 300)
        exercise(socket_path, port)
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=300)
        annotated = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", out],
                                   capture_output=True, text=True, check=True).stdout
        names, seen = [], set()
        suffix = f" [{binary}]"
        enclosing = symbol_finder(binary)
        for line in annotated.splitlines():
            if not line.endswith(suffix):
                continue
            name = re.sub(r"^\s*[\d,]+ \(\s*[\d.]+%\)\s+\?\?\?:", "", line[: -len(suffix)])
            name = re.sub(r"'\d+$", "", name)  # callgrind's mark of a recursion level
            if re.fullmatch(r"0x[0-9a-f]+", name):
                # Code callgrind could not name (no size in the symbol table): the function it lies in.
                name = enclosing(int(name, 16))
            if name and name not in seen and " " not in name:
                seen.add(name)
                names.append(name)
        if len(names) < 1000:
            sys.exit(f"linkorder: only {len(names)} functions ran; is {args.bin_dir}/halftunesd a release build?")
        with open(args.out, "w") as f:
            f.write("\n".join(names) + "\n")
        print(f"linkorder: {len(names)} functions written to {os.path.relpath(args.out, ROOT)}")
    finally:
        for p in (daemon, server):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
