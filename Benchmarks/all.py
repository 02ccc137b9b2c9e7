#!/usr/bin/env python3
"""Every benchmark after the 1 GiB one, side by side with its peers, and one summary table (`make bench`).

Run by Benchmarks/run.sh after bench.py (the 1 GiB download, `halftunesctl status`, idle RSS), with the same
release binaries. Runs, in order (each needs nginx; the peers are curl and aria2c):
  segmented.py    a paced 256 MiB download split (curl -o, aria2c -x4 -s4 -k1M) and 1 GiB at full speed (curl);
                  also writes its own table into docs/benchmarks.md (--doc)
  smallfiles.py   2,000 files of 64 KiB, 16 at a time (curl --parallel, aria2c -j16)
  scale.py        20,000 tasks created, listed, and a restart after kill -9 (halftunesd alone: no peer keeps tasks)
  controlplane.py 24 clients looping create/resume/suspend/get/list/cancel while 20 paced downloads hold every
                  slot (the issue's load: a resumed task only queues), and with 100 slots (every resume also
                  starts a transfer in halftunesd, not in aria2c), beside aria2c's RPC
  idlerss.py      what an idle daemon holds (RSS, anonymous memory), beside an idle aria2c --enable-rpc
  callcost.py     what each control call costs the daemon (CPU and bytes written per call, round trip), method by
                  method, one client, beside aria2c's RPC
  heldqueue.py    what a create + cancel costs with 0 / 10,000 / 50,000 tasks queued behind a session's limit, a
                  host's limit, the proxy cap (tinyproxy) and two users' limits (with a task.list of 50 queued),
                  beside aria2c with as many downloads waiting (addUri + forceRemove, tellWaiting)
and writes the summary table between the SUMMARY markers of docs/benchmarks.md (--doc), with the 1 GiB results
read from bench.py's JSON (--one-gib). QUICK=1 in the environment runs each with fewer runs and smaller sizes
(to check the pipeline, not to measure).

    Benchmarks/all.py --bin-dir .build-bench/release --one-gib Benchmarks/results/LATEST.json --doc docs/benchmarks.md
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BEGIN = "<!-- BEGIN SUMMARY: written by Benchmarks/all.py (make bench), replaced on every run -->"
END = "<!-- END SUMMARY -->"


def log(message):
    print(f"==> {message}", file=sys.stderr, flush=True)


def run(script, args, out):
    """Runs one benchmark script with --json OUT; returns what it wrote."""
    argv = [sys.executable, os.path.join(HERE, script)] + args + ["--json", out]
    log(" ".join(argv[1:]))
    subprocess.run(argv, check=True, stdout=sys.stderr)
    with open(out) as f:
        return json.load(f)


def ratio(a, b):
    return f"{a / b:.2f}×" if a and b else "–"


def one_gib_rows(path):
    with open(path) as f:
        r = json.load(f)
    dl = r["downloads"]
    wall = {tool: statistics.median(x["wall"] for x in dl[tool]) for tool in ("curl", "daemon")}
    cpu = {tool: statistics.median(x["cpu"] for x in dl[tool]) for tool in ("curl", "daemon") if "cpu" in dl[tool][0]}
    status_ms = statistics.median(r["idle"]["status"]["times"]) * 1000
    rows = [("1 GiB from nginx, wall (median)", f"{wall['daemon']:.2f} s", f"curl -o {wall['curl']:.2f} s",
             ratio(wall["daemon"], wall["curl"]), "≤ 1.1× curl")]
    if len(cpu) == 2:
        rows.append(("1 GiB from nginx, CPU (median)", f"{cpu['daemon']:.2f} s", f"curl -o {cpu['curl']:.2f} s",
                     ratio(cpu["daemon"], cpu["curl"]), "≤ 1.0× curl"))
    rows.append(("`halftunesctl status`, idle daemon (median)", f"{status_ms:.2f} ms", "–", "–", "≤ 10 ms"))
    rows.append(("daemon RSS after `halftunesctl status` runs (bench.py's idle phase)",
                 f"{max(r['idle']['rss_start'], r['idle']['rss_after_status']) / 1e6:.1f} MB", "–", "–", "–"))
    return rows


def segmented_rows(r):
    lim, full = r["limited"], r["full_speed"]
    rows = []
    mib = r["size"] >> 20
    if lim:
        d, a, c = lim["halftunesd"]["wall_s"], lim["aria2c -x4 -s4 -k1M"]["wall_s"], lim["curl -o"]["wall_s"]
        rows.append((f"{mib} MiB, nginx `limit_rate 16m`, wall", f"{d:.2f} s", f"aria2c -x4 {a:.2f} s", ratio(d, a),
                     "≤ 1.0× aria2c"))
        rows.append((f"{mib} MiB, nginx `limit_rate 16m`, wall", f"{d:.2f} s", f"curl -o {c:.2f} s", ratio(d, c),
                     "≤ 0.3× curl"))
    if full:
        d, c = full["halftunesd"], full["curl -o"]
        rows.append((f"{r['big'] >> 20} MiB at full speed, wall", f"{d['wall_s']:.2f} s", f"curl -o {c['wall_s']:.2f} s",
                     ratio(d["wall_s"], c["wall_s"]), "≤ 1.1× curl"))
    return rows


def smallfiles_rows(r):
    med = {}
    for tool in ("curl", "aria2c", "halftunesd"):
        walls = [x["wall_s"] for x in r["runs"] if x["tool"] == tool]
        cpus = [x["cpu_s"] for x in r["runs"] if x["tool"] == tool]
        med[tool] = (statistics.median(walls), statistics.median(cpus))
    what = f"{r['files']:,} files of {r['size'] >> 10} KiB, 16 at a time"
    d, a, c = med["halftunesd"], med["aria2c"], med["curl"]
    return [(f"{what}, wall", f"{d[0]:.2f} s", f"aria2c {a[0]:.2f} s / curl {c[0]:.2f} s", ratio(d[0], a[0]), "–"),
            (f"{what}, CPU per file", f"{d[1] * 1000 / r['files']:.2f} ms",
             f"aria2c {a[1] * 1000 / r['files']:.2f} ms / curl {c[1] * 1000 / r['files']:.2f} ms", ratio(d[1], a[1]), "–")]


def scale_rows(r, tasks):
    rate = tasks / r["create_total_s"]
    return [(f"{tasks:,} tasks: task.create", f"{rate:,.0f} /s", "no peer keeps tasks", "–", "–"),
            (f"{tasks:,} tasks: memory per task", f"{r['anonymous_bytes_per_task']:,.0f} B", "–", "–", "–"),
            (f"{tasks:,} tasks: task.list of all", f"{r['task_list_s']:.2f} s", "–", "–", "–"),
            (f"{tasks:,} tasks: kill -9, restart until daemon.status answers", f"{r['restart_until_status_s']:.2f} s",
             "–", "–", "–")]


def controlplane_rows(r, label, targets=True):
    """The issue's targets apply to its load; the run with slots to spare (different work for the two tools) has
    none."""
    d, a = r["results"]["halftunesd"], r["results"].get("aria2c")
    rows = [(f"control plane, {label}: calls/s", f"{d['callsPerSecond']:,.0f}",
             f"aria2c {a['callsPerSecond']:,.0f}" if a else "–", ratio(d["callsPerSecond"], a and a["callsPerSecond"]),
             "≥ 4,000" if targets else "–"),
            (f"control plane, {label}: `daemon.status` p99", f"{d['probeP99ms']:.1f} ms",
             f"aria2c {a['probeP99ms']:.1f} ms" if a else "–", ratio(d["probeP99ms"], a and a["probeP99ms"]),
             "≤ 10 ms" if targets else "–"),
            (f"control plane, {label}: written to disk", f"{d['writtenMiB']:,.0f} MiB",
             f"aria2c {a['writtenMiB']:,.0f} MiB" if a else "–", "–", "–")]
    return rows


# The calls that change a task's state: each is journaled (and fsynced) before it is answered.
STATE_CHANGING = ("task.create", "task.resume", "task.suspend", "task.cancel")


def callcost_rows(r):
    """One row per halftunesd method, beside aria2c's method for the same thing (same position in the list): CPU
    and bytes written per call (p50 round trip)."""
    d, a = r["results"]["halftunesd"], r["results"].get("aria2c") or []
    rows = []
    for index, m in enumerate(d):
        peer = a[index] if index < len(a) else None
        written = m.get("writtenKiBPerCall", 0)
        target = "≤ 2× aria2c" + (", ≤ 16 KiB written" if m["method"].startswith(STATE_CHANGING) else "") if peer else "–"
        rows.append((f"one call, one client: {m['method']}, daemon CPU and bytes written per call (p50 round trip)",
                     f"{m['cpuMicrosPerCall']:,.0f} µs, {written:.1f} KiB ({m['p50ms']:.2f} ms)",
                     f"{peer['method']} {peer['cpuMicrosPerCall']:,.0f} µs, {peer.get('writtenKiBPerCall', 0):.1f} KiB "
                     f"({peer['p50ms']:.2f} ms)" if peer else "–",
                     ratio(m["cpuMicrosPerCall"], peer and peer["cpuMicrosPerCall"]), target))
    return rows


def idlerss_rows(r):
    d, a = r["results"]["halftunesd"], r["results"].get("aria2c")
    return [(f"idle daemon, one session and one paused task, RSS (anonymous) after {r['seconds']:.0f} s",
             f"{d['rssKB'] / 1024:.1f} MB ({d['anonymousKB'] / 1024:.1f} MB)",
             f"aria2c --enable-rpc {a['rssKB'] / 1024:.1f} MB ({a['anonymousKB'] / 1024:.1f} MB)" if a else "–",
             ratio(d["rssKB"], a and a["rssKB"]), "≤ 20 MB")]


def heldqueue_rows(r):
    """One row per halftunesd step, beside aria2c's step with as many waiting (same queue length)."""
    d, a = r["results"]["halftunesd"], r["results"].get("aria2c") or []
    peers = {(m["queued"], m.get("kind")): m for m in a}
    rows = []
    for m in d:
        peer = peers.get((m["queued"], m.get("kind")))
        per = "call" if m.get("kind") == "list" else "pair"
        rows.append((f"{m['method']}: daemon CPU per {per} (p99 round trip)",
                     f"{m['cpuMicrosPerCall']:,.0f} µs ({m['p99ms']:.2f} ms)",
                     f"aria2c {peer['method'].rsplit(',', 1)[0]} {peer['cpuMicrosPerCall']:,.0f} µs ({peer['p99ms']:.2f} ms), "
                     f"{m['queued']:,} waiting"
                     if peer else "–", ratio(m["cpuMicrosPerCall"], peer and peer["cpuMicrosPerCall"]),
                     "flat in the queue's length"))
    return rows


def table(rows, quick):
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [BEGIN, "",
             f"Every benchmark of `make bench`, {stamp}, release binaries, this machine ({os.cpu_count()} CPUs)"
             + (" — QUICK run: small sizes and one run each, not a measurement" if quick else "") + ". "
             "Each row's details (and every run) are in the sections below and in the scripts' output.", "",
             "| measurement | halftunesd | peer | ratio | target |", "|---|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in rows]
    lines += ["", END]
    return "\n".join(lines)


def write_doc(path, text):
    with open(path) as f:
        current = f.read()
    if BEGIN in current and END in current:
        current = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: text, current, flags=re.S)
    else:
        anchor = "## Results\n"
        current = current.replace(anchor, anchor + "\n" + text + "\n", 1) if anchor in current \
            else current.rstrip("\n") + "\n\n## Summary\n\n" + text + "\n"
    with open(path, "w") as f:
        f.write(current)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--one-gib", help="bench.py's JSON of this run (its rows lead the table)")
    ap.add_argument("--doc", help="write the summary table into this file (docs/benchmarks.md)")
    args = ap.parse_args()
    quick = bool(os.environ.get("QUICK"))
    bins = ["--bin-dir", args.bin_dir]
    rows = one_gib_rows(args.one_gib) if args.one_gib else []
    with tempfile.TemporaryDirectory(prefix="halftunes-all-") as out:
        seg = ["--runs", "1", "--size", str(32 << 20), "--big", str(64 << 20), "--no-kill9"] if quick else []
        rows += segmented_rows(run("segmented.py", bins + seg + (["--doc"] if args.doc and not quick else []),
                                   os.path.join(out, "segmented.json")))
        small = ["--files", "200", "--runs", "1"] if quick else []
        rows += smallfiles_rows(run("smallfiles.py", bins + small, os.path.join(out, "smallfiles.json")))
        tasks = 2000 if quick else 20000
        rows += scale_rows(run("scale.py", bins + ["--tasks", str(tasks), "--step", str(tasks)],
                               os.path.join(out, "scale.json")), tasks)
        seconds = ["--seconds", "5"] if quick else ["--seconds", "15"]
        rows += controlplane_rows(run("controlplane.py", bins + seconds, os.path.join(out, "cp-queued.json")),
                                  "the issue's load (20 downloads hold every slot)")
        rows += controlplane_rows(run("controlplane.py", bins + seconds + ["--slots", "100"],
                                      os.path.join(out, "cp.json")), "100 slots (every resume also transfers)",
                                  targets=False)
        rows += idlerss_rows(run("idlerss.py", bins + (["--seconds", "2"] if quick else []),
                                 os.path.join(out, "idlerss.json")))
        calls = ["--calls", "300", "--transfers", "30"] if quick else []
        rows += callcost_rows(run("callcost.py", bins + calls, os.path.join(out, "callcost.json")))
        held = ["--queued", "0,2000", "--calls", "100"] if quick else []
        rows += heldqueue_rows(run("heldqueue.py", bins + held, os.path.join(out, "heldqueue.json")))
    text = table(rows, quick)
    print(text)
    if args.doc:
        write_doc(args.doc, text)
        log(f"summary written to {args.doc}")


if __name__ == "__main__":
    main()
