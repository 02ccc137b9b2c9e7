#!/usr/bin/env bash
# Benchmarks halftunesd against `curl -o` on a 1 GiB download from nginx on 127.0.0.1, times one
# `halftunesctl status` and the daemon's idle RSS, and writes the results into docs/benchmarks.md; then runs
# every other benchmark beside its peers (Benchmarks/all.py: segmented, small files, scale, control plane) and
# writes one summary table of them all.
#
# Environment:
#   RUNS=5            downloads per tool (alternating curl, daemon, curl, daemon, ...)
#   SIZE=1G           size of the served file (as `head -c` takes it)
#   BIN_DIR=DIR       use existing halftunesd/halftunesctl binaries instead of building them
#   BENCH_TMPDIR=DIR  where the temporary files go (default: $TMPDIR or /tmp; needs ~3 x SIZE)
#   STATUS_RUNS=200   timed `halftunesctl status` calls
#   IDLE_TASKS=100    suspended tasks created for the second idle-RSS reading (0 skips it)
#   WITH_CURL_FSYNC=1 also alternate `curl -o` followed by an fsync of the file (the daemon's durability cost)
#   NO_DOC=1          print the results only; leave docs/benchmarks.md alone
#   ONLY_ONE_GIB=1    stop after the 1 GiB benchmark (skip Benchmarks/all.py)
#   QUICK=1           Benchmarks/all.py with small sizes and one run each (checks the pipeline; not a measurement)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${RUNS:-5}
SIZE=${SIZE:-1G}

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'bench: %s\n' "$*" >&2; exit 1; }

# --- 1. Tools -------------------------------------------------------------------------------------------------
find_nginx() { command -v nginx 2>/dev/null || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; } || true; }
missing=()
[ -n "$(find_nginx)" ] || missing+=(nginx)
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v aria2c >/dev/null 2>&1 || missing+=(aria2)
command -v tinyproxy >/dev/null 2>&1 || missing+=(tinyproxy) # heldqueue.py: the proxy cap
command -v python3 >/dev/null 2>&1 || missing+=(python3)
[ -x /usr/bin/time ] || missing+=(time)
if [ ${#missing[@]} -gt 0 ] || ! command -v hyperfine >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq || say "apt-get update failed; trying the install anyway"
    if [ ${#missing[@]} -gt 0 ]; then
        say "installing ${missing[*]}"
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >&2
    fi
    # hyperfine is optional: without it bench.py times the status calls itself.
    say "installing hyperfine"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq hyperfine >&2 || say "no hyperfine; timing with python"
fi
NGINX=$(find_nginx)
[ -n "$NGINX" ] || die "nginx is not installed and could not be installed"
command -v curl >/dev/null 2>&1 || die "curl is not installed and could not be installed"
command -v python3 >/dev/null 2>&1 || die "python3 is not installed and could not be installed"
[ -x /usr/bin/time ] || die "GNU time (/usr/bin/time) is not installed and could not be installed"

# --- Binaries -------------------------------------------------------------------------------------------------
if [ -n "${BIN_DIR:-}" ]; then
    BIN_DIR=$(cd "$BIN_DIR" && pwd)
else
    say "building release binaries (scratch path .build-bench)"
    flags=$(make -s -C "$ROOT" print-release-flags)
    (cd "$ROOT" && swift build $flags --scratch-path .build-bench --product halftunesd \
        && swift build $flags --scratch-path .build-bench --product halftunesctl) >&2
    BIN_DIR="$ROOT/.build-bench/release"
fi
for b in halftunesd halftunesctl; do
    [ -x "$BIN_DIR/$b" ] || die "$BIN_DIR/$b is missing (set BIN_DIR or let the script build)"
done

# --- Scratch space and cleanup (runs on success, failure and Ctrl-C) --------------------------------------------
WORK=$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/halftunes-bench.XXXXXX")
NGINX_PID=""
BENCH_PID=""
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    if [ -n "$BENCH_PID" ]; then
        kill -TERM "$BENCH_PID" 2>/dev/null || true
        wait "$BENCH_PID" 2>/dev/null || true
    fi
    if [ -f "$WORK/daemon.pids" ]; then
        while read -r pid; do
            kill -KILL "$pid" 2>/dev/null || true
        done <"$WORK/daemon.pids"
    fi
    if [ -n "$NGINX_PID" ]; then
        kill -TERM "$NGINX_PID" 2>/dev/null || true
        wait "$NGINX_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- 2. nginx on 127.0.0.1, a free port, serving SIZE random bytes ------------------------------------------
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$WORK/nginx/www" "$WORK/nginx/tmp"
chmod 755 "$WORK" "$WORK/nginx" "$WORK/nginx/www"   # nginx workers may run as nobody
say "creating a $SIZE file of random bytes"
head -c "$SIZE" /dev/urandom >"$WORK/nginx/www/big.bin"
chmod 644 "$WORK/nginx/www/big.bin"
cat >"$WORK/nginx/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 64; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 65;
    default_type application/octet-stream;
    client_body_temp_path $WORK/nginx/tmp/body;
    proxy_temp_path $WORK/nginx/tmp/proxy;
    fastcgi_temp_path $WORK/nginx/tmp/fastcgi;
    uwsgi_temp_path $WORK/nginx/tmp/uwsgi;
    scgi_temp_path $WORK/nginx/tmp/scgi;
    server {
        listen 127.0.0.1:$PORT;
        root $WORK/nginx/www;
    }
}
EOF
"$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/error.log" &
NGINX_PID=$!
URL="http://127.0.0.1:$PORT/big.bin"
for _ in $(seq 1 100); do
    curl -sfI "$URL" >/dev/null 2>&1 && break
    kill -0 "$NGINX_PID" 2>/dev/null || { cat "$WORK/nginx/error.log" >&2 || true; die "nginx did not start"; }
    sleep 0.1
done
curl -sfI "$URL" >/dev/null || die "nginx does not answer on $URL"
say "nginx (pid $NGINX_PID) serves $URL"

# --- 3-5. Measure, report, write the document ------------------------------------------------------------------
doc_args=(--doc "$ROOT/docs/benchmarks.md")
[ -n "${NO_DOC:-}" ] && doc_args=()
python3 "$ROOT/Benchmarks/bench.py" \
    --url "$URL" --source "$WORK/nginx/www/big.bin" --work "$WORK" --bin-dir "$BIN_DIR" \
    --runs "$RUNS" --status-runs "${STATUS_RUNS:-200}" --idle-tasks "${IDLE_TASKS:-100}" \
    --nginx "$NGINX" --results-dir "$ROOT/Benchmarks/results" \
    ${WITH_CURL_FSYNC:+--with-curl-fsync} "${doc_args[@]}" &
BENCH_PID=$!   # waited for in the background, so a signal reaches the cleanup at once
wait "$BENCH_PID"
BENCH_PID=""

# --- 6. Every other benchmark, and the summary table ------------------------------------------------------------
if [ -z "${ONLY_ONE_GIB:-}" ]; then
    command -v aria2c >/dev/null 2>&1 || die "aria2c is not installed and could not be installed"
    latest=$(ls -t "$ROOT/Benchmarks/results/"*.json | head -1)
    python3 "$ROOT/Benchmarks/all.py" --bin-dir "$BIN_DIR" --one-gib "$latest" "${doc_args[@]}" &
    BENCH_PID=$!
    wait "$BENCH_PID"
    BENCH_PID=""
fi
