"""Machine description, the Markdown results section, and its place in docs/benchmarks.md (used by bench.py)."""
import datetime
import os
import platform
import re
import statistics
import subprocess

BEGIN = "<!-- BEGIN RESULTS: written by Benchmarks/run.sh, replaced on every run -->"
END = "<!-- END RESULTS -->"

TARGET_WALL_RATIO = 1.1
TARGET_STATUS_MS = 10.0
TARGET_IDLE_MB = 20.0

LABELS = {
    "curl": "`curl -s -o FILE URL`",
    "daemon": "halftunesd (`halftunesctl download URL --wait`)",
    "curl+fsync": "`curl -s -o FILE URL && sync FILE`",
}


def first_line(argv):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    text = (proc.stdout + proc.stderr).strip()
    return text.splitlines()[0] if text else "unknown"


def machine_info(nginx):
    mem_kb = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": first_line(["nproc"]),
        "cpu": cpu,
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "swift": first_line(["swift", "--version"]),
        "nginx": first_line([nginx, "-v"]).replace("nginx version: ", ""),
        "curl": " ".join(first_line(["curl", "--version"]).split()[:2]),
        "loadavg": " ".join(open("/proc/loadavg").read().split()[:3]),
        "filesystem": first_line(["sh", "-c", "df -T \"${BENCH_TMPDIR:-${TMPDIR:-/tmp}}\" | tail -1 | awk '{print $2}'"]),
    }


def med(rows, key):
    return statistics.median(r[key] for r in rows)


def status_summary(times):
    ms = sorted(t * 1000 for t in times)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    return {"median": statistics.median(ms), "mean": statistics.mean(ms), "min": ms[0], "p95": p95}


def yes_no(ok):
    return "yes" if ok else "**no**"


def render(results):
    m = results["machine"]
    dl = results["downloads"]
    idle = results["idle"]
    curl_wall = med(dl["curl"], "wall")
    lines = [
        f"### Results of {m['date']}",
        "",
        f"Machine: {m['nproc']} CPUs ({m['cpu']}), {m['memory_gib']} GiB memory, Linux {m['kernel']}, "
        f"{m['swift']}, nginx {m['nginx']}, {m['curl']}; files on {m['filesystem']}; "
        f"load average when the run began: {m['loadavg']}.",
        "",
        f"A {results['size']:,}-byte file of random bytes from nginx on 127.0.0.1, {results['runs']} runs per tool, "
        "alternating; every downloaded file's sha256 matched the source. Medians; MB = 10^6 bytes.",
        "",
        "| tool | wall s | wall min–max s | user+sys s | peak RSS MB | wall vs curl |",
        "|---|---|---|---|---|---|",
    ]
    for tool, rows in dl.items():
        walls = [r["wall"] for r in rows]
        cpu = f"{med(rows, 'cpu'):.2f}"
        if tool == "daemon":
            cpu += f" (daemon {med(rows, 'daemon_cpu'):.2f} + CLI {med(rows, 'ctl_cpu'):.2f})"
        lines.append(f"| {LABELS[tool]} | {med(rows, 'wall'):.2f} | {min(walls):.2f}–{max(walls):.2f} | {cpu} | "
                     f"{med(rows, 'rss') / 1e6:.1f} | {med(rows, 'wall') / curl_wall:.2f}× |")
    lines += [
        "",
        "The daemon's peak RSS is its `VmHWM` (a fresh daemon per run); its CPU is the daemon's utime+stime over "
        "the download plus the CLI's own. The CLI's peak RSS was "
        f"{med(dl['daemon'], 'ctl_rss') / 1e6:.1f} MB.",
        "",
    ]
    st = status_summary(idle["status"]["times"])
    idle_mb = max(idle["rss_start"], idle["rss_after_status"]) / 1e6
    lines += [
        f"`halftunesctl status` against an idle daemon ({idle['status']['method']}): median {st['median']:.2f} ms, "
        f"mean {st['mean']:.2f} ms, min {st['min']:.2f} ms, p95 {st['p95']:.2f} ms.",
        "",
        f"Idle daemon RSS (`VmRSS`): {idle['rss_start'] / 1e6:.1f} MB right after start, "
        f"{idle['rss_after_status'] / 1e6:.1f} MB after the status calls"
        + (f", {idle['rss_tasks'] / 1e6:.1f} MB with {idle['tasks']} created-but-suspended tasks"
           if "tasks" in idle else "")
        + f"; peak (`VmHWM`) {idle['hwm'] / 1e6:.1f} MB.",
        "",
        "| target (issue 2) | measured | met |",
        "|---|---|---|",
    ]
    ratio = med(dl["daemon"], "wall") / curl_wall
    lines += [
        f"| wall ≤ {TARGET_WALL_RATIO}× curl's | {ratio:.2f}× ({med(dl['daemon'], 'wall'):.2f} s vs "
        f"{curl_wall:.2f} s) | {yes_no(ratio <= TARGET_WALL_RATIO)} |",
        f"| `halftunesctl status` ≤ {TARGET_STATUS_MS:g} ms | {st['median']:.2f} ms median | "
        f"{yes_no(st['median'] <= TARGET_STATUS_MS)} |",
        f"| idle RSS ≤ {TARGET_IDLE_MB:g} MB | {idle_mb:.1f} MB | {yes_no(idle_mb <= TARGET_IDLE_MB)} |",
        "",
        "<details><summary>Every run, in the order they ran</summary>",
        "",
        "| run | tool | wall s | user+sys s | peak RSS MB |",
        "|---|---|---|---|---|",
    ]
    for i in range(results["runs"]):
        for tool, rows in dl.items():
            r = rows[i]
            lines.append(f"| {i + 1} | {tool} | {r['wall']:.3f} | {r['cpu']:.2f} | {r['rss'] / 1e6:.1f} |")
    lines += ["", "</details>"]
    return "\n".join(lines)


def write_doc(path, markdown):
    section = f"{BEGIN}\n{markdown}\n{END}"
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n\n## Results\n\n"
    if BEGIN in text and END in text:
        pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
        text = pattern.sub(lambda _: section, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    with open(path, "w") as f:
        f.write(text)
