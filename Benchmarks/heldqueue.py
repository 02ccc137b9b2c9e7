#!/usr/bin/env python3
"""What a control call costs while a long queue is held behind a limit (issue 28, the proxy cap's review).

A queued task that cannot start (its session at its `maxConcurrent`, its host at its limit, its owner's
transfers at 16 proxies) is passed over by every scheduler pass, and every call that changes a task runs one.
This measures what that costs: paced downloads hold the limit, --queued tasks (cumulative steps, e.g.
0,10000,50000) wait behind it, and a probe client creates a suspended task and cancels it, --calls times per
step (each create runs a scheduler pass: a free slot is there for anything that could start). Reported per
step: the daemon's CPU per create + cancel pair (its idle share taken off) and the pair's p50/p99 round trip.

  halftunesd, "session": sessions `held0`, `held1`… (9,000 queued tasks each: a session holds at most 10,000)
      have maxConcurrent 1 and run a paced download each; the queued tasks wait (hold `sessionMaxConcurrent`).
  halftunesd, "proxies" (tinyproxy installed): 16 sessions of one uid each run a paced download through a
      proxy of their own (one tinyproxy, 16 user names: 16 distinct proxies to the daemon); the queued tasks
      are in sessions whose proxy is a 17th (hold `uidMaxProxies`).
  halftunesd, "host": `--max-connections-per-host 1`, one paced download holds the origin's only connection;
      the queued tasks (sessions `bulk0`, `bulk1`…, no limit of their own) go to the same origin (hold
      `hostMaxConnections`) while the daemon has slots to spare.
  halftunesd, "users" (run as root): two users queue behind their sessions' limits — root in sessions `held0`…
      and uid 65534 (a client process of its own) in `other0`…, half the tasks each — and the probe creates a
      task already started (it queues, held, and its answer gives its place in the queue shared between the
      two users) and cancels it; then a task.list of 50 queued tasks. Both name each task's place in the shared
      order.
  aria2c: -j 1 runs the paced download; the queued downloads wait in its queue; the probe is aria2.addUri
      (paused) + aria2.forceRemove, then aria2.tellWaiting (0, 50) (beside the users scenario's task.list).

    Benchmarks/heldqueue.py --bin-dir .build-bench/release [--queued 0,10000,50000] [--calls 500]
        [--scenarios session,host,users,proxy] [--json out.json]
"""
import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from callcost import idle_cpu_rate, measure  # noqa: E402
from controlplane import Aria2, add_common_arguments, aria2_rpc, port_open, side_by_side, wait_until  # noqa: E402
from scale import Connection, Daemon  # noqa: E402
from smallfiles import free_port  # noqa: E402


# Tasks queued per session (a session holds at most 10,000 unfinished tasks).
PER_SESSION = 9000


def pipelined(c, requests, window=256):
    """Sends (method, params) requests on connection `c` with up to `window` in flight; returns the results."""
    results, sent, received = [], 0, 0
    while received < len(requests):
        while sent < len(requests) and sent - received < window:
            c.send(*requests[sent])
            sent += 1
        results.append(c.receive())
        received += 1
    return results


def settle(pid, seconds=1.0):
    """Waits until the process uses no more CPU than idle (the queued tasks' journal writes are done), at most 30 s."""
    from smallfiles import cpu_seconds
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(seconds)
        if cpu_seconds(pid) - before < 0.05 * seconds:
            return


def steps(args):
    return [int(n) for n in args.queued.split(",")]


def probe_steps(pid, add_queued, args, probes, queued=0):
    """For each cumulative --queued step: queue tasks up to it (`add_queued(count, first)`), then measure each of
    `probes(target, queued)`, (label, call, check of the calls' results or None, kind or None), --calls times."""
    rows = []
    for target in steps(args):
        if target > queued:
            add_queued(target - queued, queued)
            queued = target
            settle(pid)
        idle = idle_cpu_rate(pid)
        for label, call, check, kind in probes(target, queued):
            row, results = measure(pid, label, range(args.calls), call, idle)
            if check:
                check(results)
            row["queued"] = target # beside aria2c's step of this length
            if kind:
                row["kind"] = kind
            rows.append(row)
    return rows


def create_cancel(c, url, label):
    """The one-user scenarios' probe: a suspended task created in session `cost` and canceled."""
    def probes(target, queued):
        def pair(i):
            t = c.call("task.create", {"session": "cost", "url": url, "destination": f"probe-{target}-{i}.bin"})
            c.call("task.cancel", {"id": t["id"]})
        return [(f"{label}: create + cancel, {target} held", pair, None, None)]
    return probes


def queue_behind(c, url, count, first, prefix, expected_hold, open_session):
    """Queues `count` started tasks (numbered from `first`) in sessions `<prefix>0`, `<prefix>1`… (PER_SESSION
    each; `open_session(name)` opens each new one), then checks that `<prefix>0`'s queued tasks wait for
    `expected_hold`."""
    requests = []
    for n in range(first, first + count):
        session = f"{prefix}{n // PER_SESSION}"
        if n % PER_SESSION == 0:
            open_session(session)
        requests.append(("task.create", {"session": session, "url": url, "destination": f"h{n}.bin", "start": True}))
    created = pipelined(c, requests)
    sample = c.call("task.list", {"session": f"{prefix}0", "state": "queued", "limit": 1})
    hold = (sample.get("tasks") or [{}])[0].get("hold", {}).get("reason")
    if count and hold != expected_hold:
        raise RuntimeError(f"the queued tasks of {prefix}0 wait for {hold}, not {expected_hold}")
    return [t["id"] for t in created]


def middle_ids(ids, calls):
    """`calls` distinct ids from the middle of `ids` (one per probe: each goes to the back once resumed)."""
    start = max(0, len(ids) // 2 - calls // 2)
    return ids[start:start + calls]


@contextlib.contextmanager
def probe_daemon(bin_dir, work, per_host=1000):
    """A daemon with 40 transfer slots and `per_host` connections per host, and a connection to it with the probe's
    session `cost` open; yields (daemon, connection) and stops the daemon afterwards."""
    daemon = Daemon(bin_dir, work, ["--max-concurrent", "40", "--max-connections-per-host", str(per_host)])
    try:
        daemon.start()
        c = Connection(daemon.socket)
        c.call("session.open", {"identifier": "cost"})
        yield daemon, c
    finally:
        daemon.stop()


def run_session_hold(bin_dir, work, url, args):
    with probe_daemon(bin_dir, work) as (daemon, c):
        def open_held(index):
            name = f"held{index}"
            c.call("session.open", {"identifier": name, "configuration": {"maxConcurrent": 1}})
            c.call("task.create", {"session": name, "url": url, "destination": f"running{index}.bin", "start": True,
                                   "maxConnections": 1})
            wait_until(lambda: c.call("daemon.status")["tasks"].get("running", 0) >= index + 1, "the paced downloads")
            return name

        ids = []

        def add(count, first): # held0 is open already
            ids.extend(queue_behind(c, url, count, first, "held", "sessionMaxConcurrent",
                                    lambda name: name == "held0" or open_held(int(name[len("held"):]))))

        def probes(target, queued):
            rows = create_cancel(c, url, "session limit")(target, queued)
            if target < args.calls:
                return rows
            middle = middle_ids(ids, args.calls)

            def suspend_resume(i): # out of the middle of the owner's run and its lane's, then to their back
                c.call("task.suspend", {"id": middle[i]})
                return c.call("task.resume", {"id": middle[i]})

            def queued_again(results):
                if any(t["state"] != "queued" for t in results):
                    raise RuntimeError("a resumed task is not queued")
            return rows + [(f"session limit: suspend + resume of a task in the middle, {target} held",
                            suspend_resume, queued_again, "middle")]

        open_held(0)
        return probe_steps(daemon.process.pid, add, args, probes)


def run_host_hold(bin_dir, work, url, args):
    with probe_daemon(bin_dir, work, per_host=1) as (daemon, c):
        c.call("session.open", {"identifier": "running"})
        c.call("task.create", {"session": "running", "url": url, "destination": "running.bin", "start": True,
                               "maxConnections": 1})
        wait_until(lambda: c.call("daemon.status")["tasks"].get("running", 0) >= 1, "the paced download")

        def add(count, first):
            queue_behind(c, url, count, first, "bulk", "hostMaxConnections",
                         lambda name: c.call("session.open", {"identifier": name}))

        return probe_steps(daemon.process.pid, add, args, create_cancel(c, url, "host limit"))


OTHER_UID = 65534


def as_other_user():
    os.setgroups([])
    os.setgid(OTHER_UID)
    os.setuid(OTHER_UID)


def other_python():
    """A Python uid 65534 can run: the system's, when this one lives where that user cannot reach (pyenv in /root)."""
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def queue_as_other_user(socket_path, url, count, first):
    """Run as uid 65534 (a process of its own): queues `count` tasks in sessions `other0`… behind a paced
    download each (maxConcurrent 1)."""
    c = Connection(socket_path)
    requests = []
    for n in range(first, first + count):
        session = f"other{n // PER_SESSION}"
        if n % PER_SESSION == 0:
            c.call("session.open", {"identifier": session, "configuration": {"maxConcurrent": 1}})
            c.call("task.create", {"session": session, "url": url, "destination": f"o-running{n}.bin", "start": True,
                                   "maxConnections": 1})
        requests.append(("task.create", {"session": session, "url": url, "destination": f"o{n}.bin", "start": True}))
    pipelined(c, requests)


def run_users_hold(bin_dir, work, url, args):
    if os.geteuid() != 0:
        print("heldqueue: the users scenario needs root (a client as uid 65534); left out", file=sys.stderr)
        return []
    daemon = Daemon(bin_dir, work, ["--max-concurrent", "40", "--max-connections-per-host", "1000"])
    path = work
    while path != "/" and not os.stat(path).st_mode & 0o001: # uid 65534 must reach the socket
        os.chmod(path, os.stat(path).st_mode | 0o011)
        path = os.path.dirname(path)
    try:
        daemon.start()
        os.chmod(daemon.socket, 0o666) # as the tests' two users (the daemon makes it 0660)
        os.chmod(os.path.join(work, "downloads"), 0o711)
        c = Connection(daemon.socket)

        def add(count, first):
            mine, theirs = count // 2, count - count // 2
            requests = []
            for n in range(first // 2, first // 2 + mine):
                session = f"held{n // PER_SESSION}"
                if n % PER_SESSION == 0:
                    c.call("session.open", {"identifier": session, "configuration": {"maxConcurrent": 1}})
                    c.call("task.create", {"session": session, "url": url, "destination": f"running{n}.bin",
                                           "start": True, "maxConnections": 1})
                requests.append(("task.create", {"session": session, "url": url, "destination": f"h{n}.bin",
                                                 "start": True}))
            pipelined(c, requests)
            code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
                    f"from heldqueue import queue_as_other_user; "
                    f"queue_as_other_user({daemon.socket!r}, {url!r}, {theirs}, {first - first // 2})")
            subprocess.run([other_python(), "-c", code], check=True, preexec_fn=as_other_user, cwd="/")

        add(2, 0) # both users have a session held from the start: the probe's task always queues behind it

        def probes(target, queued):
            def pair(i):
                t = c.call("task.create", {"session": "held0", "url": url, "destination": f"probe-{target}-{i}.bin",
                                           "start": True})
                c.call("task.cancel", {"id": t["id"]})
                return t.get("queuePosition")

            def placed(places):
                if not any(places):
                    raise RuntimeError("no probe task was answered with its place in the queue")

            def listing(i):
                page = c.call("task.list", {"session": "held0", "state": "queued", "limit": 50})
                return all(t.get("queuePosition") for t in page["tasks"]) and len(page["tasks"]) > 0

            def listed(pages):
                if not all(pages):
                    raise RuntimeError("a task.list page without queued tasks or without their places")

            return [(f"two users: create (queued) + cancel, {queued} held", pair, placed, None),
                    (f"two users: task.list (50 queued), {queued} held", listing, listed, "list")]

        return probe_steps(daemon.process.pid, add, args, probes, queued=2)
    finally:
        daemon.stop()


def start_tinyproxy(work):
    port = free_port()
    conf = os.path.join(work, "tinyproxy.conf")
    with open(conf, "w") as f:
        f.write(f"Port {port}\nListen 127.0.0.1\nTimeout 600\nMaxClients 200\nAllow 127.0.0.1\n"
                f"LogFile \"{work}/tinyproxy.log\"\nLogLevel Warning\n")
    process = subprocess.Popen(["tinyproxy", "-d", "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: port_open(port), "tinyproxy")
    except BaseException:
        process.kill()
        process.wait(timeout=30)
        raise
    return process, port


def run_proxy_hold(bin_dir, work, url, args):
    os.makedirs(work, exist_ok=True)
    proxy, port = start_tinyproxy(work)
    try:
        with probe_daemon(bin_dir, os.path.join(work, "daemon")) as (daemon, c):
            return run_behind_proxies(daemon, c, url, port, args)
    finally:
        proxy.kill()
        proxy.wait(timeout=30)


def run_behind_proxies(daemon, c, url, port, args):
    """The proxy scenario once tinyproxy and the daemon run: 16 paced downloads through 16 proxies, the queued
    tasks through a 17th."""
    for i in range(16):
        c.call("session.open", {"identifier": f"p{i}", "configuration": {"proxy": f"http://u{i}:p@127.0.0.1:{port}"}})
    for i in range(16):
        c.call("task.create", {"session": f"p{i}", "url": url, "destination": f"running-{i}.bin", "start": True,
                               "maxConnections": 1})
    wait_until(lambda: c.call("daemon.status")["tasks"].get("running", 0) >= 16, "16 paced downloads")

    def add(count, first):
        queue_behind(c, url, count, first, "p16-", "uidMaxProxies", lambda name: c.call("session.open", {
            "identifier": name, "configuration": {"proxy": f"http://u16:p@127.0.0.1:{port}"}}))

    return probe_steps(daemon.process.pid, add, args, create_cancel(c, url, "proxy cap"))


def run_halftunesd(bin_dir, work, url, args):
    wanted = args.scenarios.split(",")
    rows = []
    if "session" in wanted:
        rows += run_session_hold(bin_dir, os.path.join(work, "session"), url, args)
    if "host" in wanted:
        rows += run_host_hold(bin_dir, os.path.join(work, "host"), url, args)
    if "users" in wanted:
        rows += run_users_hold(bin_dir, os.path.join(work, "users"), url, args)
    if "proxy" in wanted and shutil.which("tinyproxy") and not args.no_proxy:
        rows += run_proxy_hold(bin_dir, os.path.join(work, "proxy"), url, args)
    return rows


def run_aria2(work, url, args):
    rows, queued = [], 0
    with aria2_rpc(work, 1) as (process, port):
        pid = process.pid
        c = Aria2(port)
        c.call("aria2.addUri", [[url], {"out": "running.bin"}])
        wait_until(lambda: int(c.call("aria2.getGlobalStat")["numActive"]) >= 1, "the paced download")
        gids = []
        for target in steps(args):
            while queued < target:
                batch = min(500, target - queued)
                added = c.call("system.multicall", [[{"methodName": "aria2.addUri", "params": [[url], {"out": f"h{queued + i}.bin"}]}
                                                     for i in range(batch)]])
                gids += [g[0] for g in added]
                queued += batch
            idle = idle_cpu_rate(pid)

            def pair(i):
                gid = c.call("aria2.addUri", [[url], {"pause": "true", "out": f"probe-{target}-{i}.bin"}])
                c.call("aria2.forceRemove", [gid])

            row, _ = measure(pid, f"addUri (paused) + forceRemove, {target} waiting", range(args.calls), pair, idle)
            row["queued"] = target
            rows.append(row)

            def listing(i):
                c.call("aria2.tellWaiting", [0, 50])

            row, _ = measure(pid, f"tellWaiting (0, 50), {target} waiting", range(args.calls), listing, idle)
            row["queued"], row["kind"] = target, "list"
            rows.append(row)
            if target < args.calls:
                continue
            middle = middle_ids(gids, args.calls)

            def pause_unpause(i): # out of the middle of the waiting queue, then to its back
                c.call("aria2.forcePause", [middle[i]])
                c.call("aria2.unpause", [middle[i]])

            row, _ = measure(pid, f"forcePause + unpause in the middle, {target} waiting", range(args.calls), pause_unpause, idle)
            row["queued"], row["kind"] = target, "middle"
            rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser)
    parser.add_argument("--queued", default="0,10000,50000", help="cumulative steps of queued (held) tasks")
    parser.add_argument("--calls", type=int, default=500, help="probe pairs per step")
    parser.add_argument("--no-proxy", action="store_true", help="leave out the proxy-cap scenario")
    parser.add_argument("--scenarios", default="session,host,users,proxy",
                        help="which of halftunesd's scenarios to run (comma-separated: session, host, users, proxy)")
    args = parser.parse_args()
    results = side_by_side(args, "htd-heldqueue-", run_halftunesd, run_aria2)
    print(f"{'tool':<12}{'probe':<52}{'CPU/pair':>12}{'p50':>10}{'p99':>10}")
    for tool, rows in results.items():
        for r in rows:
            print(f"{tool:<12}{r['method']:<52}{r['cpuMicrosPerCall']:>9.0f} µs{r['p50ms']:>8.2f}ms{r['p99ms']:>8.2f}ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"queued": steps(args), "calls": args.calls, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
