#!/usr/bin/env bash
# wrk against `GET /health` on gkq serve (io_uring, then epoll) and on nginx serving a static body of the same bytes,
# on this machine, in one run: keep-alive at 50 and 200 connections, and Connection: close at 50. Prints a Markdown
# table with requests/s, p99 latency and the ratio to nginx measured in the same run.
#
#   packaging/bench/http_bench.sh [path/to/gkq]        (default: build/app/gkq)
#   DURATION=10s THREADS=2 NGINX_WORKERS=1 packaging/bench/http_bench.sh build/app/gkq
#
# Needs wrk and nginx (Debian: apt-get install wrk nginx-light). NGINX_WORKERS defaults to 1, matching gkq's single
# event-loop thread; set it to "auto" to give nginx every core. Everything binds 127.0.0.1 only.
set -euo pipefail

gkq="${1:-build/app/gkq}"
duration="${DURATION:-10s}"
threads="${THREADS:-2}"
nginx_workers="${NGINX_WORKERS:-1}"

for tool in wrk nginx; do
    command -v "$tool" >/dev/null || { echo "http_bench: $tool not found (apt-get install wrk nginx-light)" >&2; exit 2; }
done
[ -x "$gkq" ] || { echo "http_bench: no gkq binary at $gkq" >&2; exit 2; }

work="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# A port nothing on 127.0.0.1 answers on (a refused connection), for nginx.
free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 20000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
    done
}

wait_http() {  # port
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    echo "http_bench: nothing listens on port $1" >&2
    exit 1
}

# The start_* functions set $port (they run in this shell, so the servers they start are cleaned up).
start_gkq() {  # backend (gkq picks a free port and logs it)
    IO_BACKEND="$1" "$gkq" serve --port 0 --idle-timeout-ms 600000 --max-connections 4096 \
        2>"$work/gkq-$1.log" &
    pids+=($!)
    port=""
    for _ in $(seq 1 100); do
        port="$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/gkq-$1.log" | grep -o '[0-9]*$' || true)"
        [ -n "$port" ] && break
        sleep 0.05
    done
    [ -n "$port" ] || { cat "$work/gkq-$1.log" >&2; exit 1; }
    wait_http "$port"
}

start_nginx() {  # body
    port="$(free_port)"
    mkdir -p "$work/nginx"
    printf '%s' "$1" >"$work/nginx/health.json"
    chmod 755 "$work" "$work/nginx" && chmod 644 "$work/nginx/health.json"  # nginx workers run as nobody
    cat >"$work/nginx/nginx.conf" <<EOF
worker_processes $nginx_workers;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 100000000;
    keepalive_timeout 600s;
    server {
        listen 127.0.0.1:$port;
        location = /health { default_type application/json; alias $work/nginx/health.json; }
    }
}
EOF
    nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" &
    pids+=($!)
    wait_http "$port"
}

# wrk's "Requests/sec" and its 99% latency converted to milliseconds.
run_wrk() {  # port connections extra-header...
    local port="$1" conns="$2"
    shift 2
    local out
    out="$(wrk -t "$threads" -c "$conns" -d "$duration" --latency "$@" "http://127.0.0.1:$port/health")"
    local rps p99
    rps="$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")"
    p99="$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us$/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} \
            else if (v ~ /s$/) {sub(/s$/,"",v); v*=1000}; printf "%.3f", v}' <<<"$out")"
    local errors
    errors="$(awk '/Non-2xx|Socket errors/ {print}' <<<"$out" | tr '\n' ' ')"
    echo "$rps $p99 ${errors:-}"
}

start_gkq io_uring
gkq_uring_port="$port"
start_gkq epoll
gkq_epoll_port="$port"
uring_detail="$(grep -o 'listening on .*' "$work/gkq-io_uring.log")"
body="$(exec 3<>"/dev/tcp/127.0.0.1/$gkq_epoll_port"; printf 'GET /health HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n' >&3;
        sed -n '/^\r$/,$p' <&3 | tail -n +2)"
start_nginx "$body"
nginx_port="$port"
nginx_body="$(exec 3<>"/dev/tcp/127.0.0.1/$nginx_port"; printf 'GET /health HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n' >&3;
              sed -n '/^\r$/,$p' <&3 | tail -n +2)"
[ "$nginx_body" = "$body" ] || { echo "http_bench: nginx answers '$nginx_body', gkq '$body'" >&2; exit 1; }

echo "# GET /health: gkq serve vs nginx ($(nproc) cores, wrk -t$threads -d$duration, nginx worker_processes $nginx_workers)"
echo "# body: $body (${#body} bytes, same bytes from both)"
echo "# gkq io_uring: $uring_detail"
echo
echo "| workload | server | requests/s | p99 (ms) | vs nginx req/s | vs nginx p99 |"
echo "|---|---|---:|---:|---:|---:|"
for workload in "keep-alive 50" "keep-alive 200" "close 50"; do
    read -r mode conns <<<"$workload"
    header=()
    [ "$mode" = close ] && header=(-H "Connection: close")
    read -r n_rps n_p99 n_err <<<"$(run_wrk "$nginx_port" "$conns" "${header[@]}")"
    echo "| $mode, $conns conns | nginx | $n_rps | $n_p99 | 1.00 | 1.00 |${n_err:+ $n_err}"
    for backend in io_uring epoll; do
        port="$gkq_epoll_port"
        [ "$backend" = io_uring ] && port="$gkq_uring_port"
        read -r rps p99 err <<<"$(run_wrk "$port" "$conns" "${header[@]}")"
        ratio="$(awk -v a="$rps" -v b="$n_rps" 'BEGIN {printf "%.2f", a / b}')"
        lat="$(awk -v a="$p99" -v b="$n_p99" 'BEGIN {printf "%.2f", a / b}')"
        echo "| $mode, $conns conns | gkq $backend | $rps | $p99 | $ratio | $lat |${err:+ $err}"
    done
done
