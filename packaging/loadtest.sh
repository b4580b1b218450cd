#!/usr/bin/env bash
# Load test: starts gkq serve on the bundled demo model on a free loopback port, runs wrk with a mixed load of
# GET /health, GET /metrics and POST /infer (packaging/loadtest.lua) for a bounded time, then prints throughput,
# latency percentiles (wrk, all requests), error counts (non-2xx by class, socket errors) and, from the server's own
# /metrics before and after, the responses per route and status code with their mean duration. Drains the server
# with SIGTERM at the end. Only 127.0.0.1 is contacted.
# usage: packaging/loadtest.sh [GKQ_BINARY] [-d SECONDS] [-c CONNECTIONS] [-t WRK_THREADS] [--backend B]
#        (defaults: build/app/gkq, 10 s, 16 connections, 2 threads, auto). Mix: MIX_HEALTH/MIX_METRICS/MIX_INFER
#        (6/1/3 of every 10 requests), INFER_MAX_TOKENS (16); server: GKQ_THREADS (1), GKQ_WORKERS (1).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
gkq="$root/build/app/gkq"
duration=10
connections=16
wrk_threads=2
backend=auto
while [[ $# -gt 0 ]]; do
    case "$1" in
        -d) duration="$2"; shift 2 ;;
        -c) connections="$2"; shift 2 ;;
        -t) wrk_threads="$2"; shift 2 ;;
        --backend) backend="$2"; shift 2 ;;
        -h | --help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "loadtest.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) gkq="$1"; shift ;;
    esac
done
[[ "$duration" =~ ^[0-9]+$ && "$duration" -ge 1 && "$duration" -le 600 ]] ||
    { echo "loadtest.sh: -d $duration: seconds from 1 to 600" >&2; exit 2; }
[[ -x "$gkq" ]] || { echo "loadtest.sh: $gkq is not an executable gkq (build it, or pass its path)" >&2; exit 2; }
command -v wrk >/dev/null || { echo "loadtest.sh: wrk not found (Debian package wrk)" >&2; exit 2; }
command -v curl >/dev/null || { echo "loadtest.sh: curl not found" >&2; exit 2; }

tmp="$(mktemp -d)"
server=""
cleanup() {
    if [[ -n "$server" ]] && kill -0 "$server" 2>/dev/null; then kill -KILL "$server" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
demo="$root/resources/demo"
"$gkq" serve --weights "$demo" --tokenizer "$demo/tokenizer.bin" --host 127.0.0.1 --port 0 \
    --threads "${GKQ_THREADS:-1}" --workers "${GKQ_WORKERS:-1}" --io-backend "$backend" 2>"$tmp/serve.log" &
server=$!
for _ in $(seq 300); do
    grep -qE "weights loaded|loading failed" "$tmp/serve.log" && break
    kill -0 "$server" 2>/dev/null || break
    read -rt 0.1 <> <(:) || true
done
if ! grep -q "weights loaded" "$tmp/serve.log"; then
    cat "$tmp/serve.log" >&2
    echo "loadtest.sh: gkq serve did not start" >&2
    exit 1
fi
port="$(grep -oE 'listening on http://127\.0\.0\.1:[0-9]+' "$tmp/serve.log" | grep -oE '[0-9]+$')"
base="http://127.0.0.1:$port"
echo "server: $(grep -oE 'listening on .*' "$tmp/serve.log")"
echo "        $(grep -oE 'weights loaded: .*' "$tmp/serve.log")"
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) before the run;" \
    "$(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2)"
echo "load: wrk -t$wrk_threads -c$connections -d${duration}s, mix per 10 requests: /health ${MIX_HEALTH:-6}," \
    "/metrics ${MIX_METRICS:-1}, /infer ${MIX_INFER:-3} (max_tokens ${INFER_MAX_TOKENS:-16}, greedy)"

curl -fsS "$base/metrics" >"$tmp/before.txt"
timeout $((duration + 30)) wrk -t"$wrk_threads" -c"$connections" -d"${duration}s" --timeout 5s --latency \
    -s "$root/packaging/loadtest.lua" "$base" >"$tmp/wrk.txt" 2>&1 || { cat "$tmp/wrk.txt"; exit 1; }
curl -fsS "$base/metrics" >"$tmp/after.txt"
echo
echo "---- wrk ----"
grep -vE '^result ' "$tmp/wrk.txt"
echo "---- totals (loadtest.lua) ----"
grep -E '^result ' "$tmp/wrk.txt" | sed 's/^result //'

# Per route from the server's counters: responses during the run by status code, and their mean duration.
echo "---- server side (/metrics after minus before) ----"
printf "%-10s %10s %-22s %14s\n" route responses "by code" "mean ms"
awk '
    FNR == 1 { file++ }
    /^gkq_http_requests_total\{/ || /^gkq_http_request_duration_seconds_(sum|count)\{/ {
        v[file, $1] = $2
        names[$1] = 1
    }
    function label(n, k) {
        if (!match(n, k "=\"[^\"]*\"")) return ""
        return substr(n, RSTART + length(k) + 2, RLENGTH - length(k) - 3)
    }
    END {
        for (n in names) {
            r = label(n, "route")
            if (n ~ /^gkq_http_requests_total/) {
                d = v[2, n] - v[1, n]
                if (r == "/metrics" && label(n, "code") == "200") d -= 1  # the "before" scrape of this script
                if (d > 0) { codes[r] = codes[r] " " label(n, "code") ":" d; total[r] += d }
            } else if (n ~ /_count\{/) {
                s = n; sub(/_count\{/, "_sum{", s)
                cnt[r] = v[2, n] - v[1, n]; sum[r] = v[2, s] - v[1, s]
            }
        }
        for (r in total)
            printf "%-10s %10d %-22s %14.3f\n", r, total[r], codes[r], (cnt[r] > 0 ? 1000 * sum[r] / cnt[r] : 0)
    }' "$tmp/before.txt" "$tmp/after.txt" | sort
grep -E '^gkq_inference_(requests_total|rejected_total|tokens_total)' "$tmp/after.txt" | sed 's/^/after: /'

kill -TERM "$server"
rc=0
wait "$server" || rc=$?
server=""
echo "server drained on SIGTERM, exit code $rc"
[[ $rc -eq 0 ]]
