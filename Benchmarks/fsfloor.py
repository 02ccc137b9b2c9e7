#!/usr/bin/env python3
"""What the file system alone costs per small file, as a floor for the small-files benchmark.

Does, for each of N files of SIZE bytes in a fresh directory on the same file system as the benchmarks (the
system temp dir), what any downloader must do to leave a file at its name -- create a hidden partial, write
it, link it to its name, unlink the partial -- without fsyncs ("nosync", as curl and aria2c do) and with the
fsyncs halftunesd makes (the data, the directory entry of the new partial, the directory after the link:
"durable"). Prints the process's CPU (user + system) per file for each, alternating, ROUNDS times.

  python3 Benchmarks/fsfloor.py [--files 2000] [--size 65536] [--rounds 2]
"""
import argparse
import os
import resource
import shutil
import tempfile
import time


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(directory, files, data, durable):
    os.makedirs(directory)
    dfd = os.open(directory, os.O_RDONLY)
    c0, t0 = cpu(), time.monotonic()
    for i in range(files):
        partial, name = os.path.join(directory, f".f{i}.partial"), os.path.join(directory, f"f{i}")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.pwrite(fd, data, 0)
        if durable:
            os.fsync(fd)
            os.fsync(dfd)
        os.close(fd)
        os.link(partial, name)
        os.unlink(partial)
        if durable:
            os.fsync(dfd)
    seconds, wall = cpu() - c0, time.monotonic() - t0
    os.close(dfd)
    shutil.rmtree(directory)
    return seconds, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--size", type=int, default=64 * 1024)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="htd-fsfloor.")
    data = os.urandom(args.size)
    try:
        for r in range(1, args.rounds + 1):
            for mode in ("nosync", "durable"):
                seconds, wall = run(os.path.join(work, f"{mode}{r}"), args.files, data, mode == "durable")
                print(f"  round {r} {mode:<8} cpu {seconds * 1000 / args.files:.3f} ms per file, wall {wall:.2f} s",
                      flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
