#!/usr/bin/env bash
# The scale benchmark of docs/scale.md: every step of the pipeline on a synthetic checkpoint with a published
# model's exact shapes (`gkq synth --like`), with wall time (median of --runs) and peak RSS (/usr/bin/time -v) of
# each, and llama.cpp's tools measured in the same run on the same weights where a llama.cpp build is given.
#
#   packaging/bench/scale.sh [--gkq BIN] [--llama-bin DIR] [--like NAME] [--layers N] [--runs R] [--work DIR]
#                            [--mem-limit-gb G] [--threads T] [--keep]
#
#   --gkq BIN        gkq binary (default build/app/gkq)
#   --llama-bin DIR  folder with llama.cpp's llama-quantize and llama-bench (a CPU build made out of tree, e.g. from
#                    the source node-llama-cpp bundles: llama/gitRelease.bundle). Without it the llama.cpp rows are
#                    left out, with a line saying so.
#   --like NAME      model shapes (default tinyllama-1.1b; `gkq synth --help` lists them, e.g. llama-3-8b)
#   --layers N       keep only the first N layers (default 0: all)
#   --runs R         runs per step; the table shows the median wall time and the largest peak RSS (default 3)
#   --work DIR       scratch folder (default: a new one under /tmp, removed at the end unless --keep)
#   --mem-limit-gb G a step whose resident memory passes G GiB is stopped and reported as such (default 17)
#   --threads T      threads for every step, gkq and llama.cpp alike (default: nproc)
#   --serve-cache-mb M the serve step's weight cache budget (default 4096, the 8 B budget's 4 GB)
#   --eval-bytes B   bytes of text for the eval step (default 4096; the synthetic vocabulary spells it in byte tokens,
#                    so B bytes are about B tokens, each run through both models)
#   --model DIR      measure this bf16 checkpoint (made by `gkq synth --like NAME --dtype bf16`) instead of writing one
#   --steps LIST     comma-separated steps to run (default all): inspect, analyze, quantize, quantize-k,
#                    generate-model, generate-knot, eval, serve, llama (generate-knot, eval and serve need quantize's
#                    knot; quantize-k is gkq's q4_k_m preset, and llama-quantize's Q4_K_M where llama is a step too)
#
# Prints a Markdown table to stdout and the load average before and after. The machine is noisy: quote medians.
set -euo pipefail

gkq=build/app/gkq
llama_bin=""
like=tinyllama-1.1b
layers=0
runs=3
work=""
keep=0
mem_limit_gb=17
threads="$(nproc)"
serve_cache_mb=4096
eval_bytes=4096
model=""
steps="inspect,analyze,quantize,quantize-k,generate-model,generate-knot,eval,serve,llama"

usage() { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --gkq) gkq="$2"; shift 2 ;;
        --llama-bin) llama_bin="$2"; shift 2 ;;
        --like) like="$2"; shift 2 ;;
        --layers) layers="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --work) work="$2"; shift 2 ;;
        --keep) keep=1; shift ;;
        --mem-limit-gb) mem_limit_gb="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --serve-cache-mb) serve_cache_mb="$2"; shift 2 ;;
        --eval-bytes) eval_bytes="$2"; shift 2 ;;
        --model) model="$2"; shift 2 ;;
        --steps) steps="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "scale.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for v in "$layers" "$runs" "$mem_limit_gb" "$threads" "$serve_cache_mb" "$eval_bytes"; do
    [[ "$v" =~ ^[0-9]+$ ]] || { echo "scale.sh: '$v' is not a whole number" >&2; exit 2; }
done
[ "$runs" -ge 1 ] || { echo "scale.sh: --runs must be at least 1" >&2; exit 2; }
for step in ${steps//,/ }; do
    case "$step" in
        inspect|analyze|quantize|quantize-k|generate-model|generate-knot|eval|serve|llama) ;;
        *) echo "scale.sh: --steps: unknown step '$step' (see --help)" >&2; exit 2 ;;
    esac
done
want() { [[ ",$steps," == *",$1,"* ]]; }
if [ -n "$model" ] && [ ! -e "$model" ]; then echo "scale.sh: --model: $model not found" >&2; exit 2; fi
[ -x "$gkq" ] || { echo "scale.sh: no gkq binary at $gkq (build it, or pass --gkq)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "scale.sh: /usr/bin/time not found (apt-get install time)" >&2; exit 2; }
if [ -n "$llama_bin" ]; then
    for t in llama-quantize llama-bench; do
        [ -x "$llama_bin/$t" ] || { echo "scale.sh: $llama_bin/$t not found; llama.cpp rows need a CPU build of its tools" >&2; exit 2; }
    done
fi

if [ -z "$work" ]; then work="$(mktemp -d /tmp/gkq-scale-XXXXXX)"; else mkdir -p "$work"; fi
cleanup() { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT
limit_kb=$((mem_limit_gb * 1024 * 1024))

# measure NAME CMD...: runs CMD $runs times under /usr/bin/time -v with a memory watchdog; appends
# "NAME|median wall s|max peak RSS MiB|note" to $work/rows.
measure() {
    local name="$1"; shift
    local walls=() rates=() peak=0 note="" i
    for ((i = 0; i < runs; i++)); do
        local tf="$work/time.$$" log="$work/log.$$"
        /usr/bin/time -v -o "$tf" "$@" >"$log" 2>&1 &
        local tpid=$! stopped=0
        while kill -0 "$tpid" 2>/dev/null; do
            local rss
            rss="$( (ps -o rss= --ppid "$tpid" 2>/dev/null || true) | awk '{s += $1} END {print s + 0}')"
            if [ "$rss" -gt "$limit_kb" ]; then
                pkill -TERM -P "$tpid" 2>/dev/null || true
                stopped=1
            fi
            sleep 0.2  # a watchdog's poll, not a timing
        done
        local rc=0
        wait "$tpid" || rc=$?
        if [ "$stopped" = 1 ]; then note="stopped above ${mem_limit_gb} GiB"; fi
        if [ "$rc" != 0 ] && [ "$stopped" = 0 ]; then
            note="exit $rc: $(tail -n 1 "$log" | tr '|' '/' | cut -c1-120)"
        fi
        local wall rss_kb
        wall="$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0; for (j = 1; j <= n; j++) s = s * 60 + p[j]; print s}' "$tf")"
        rss_kb="$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tf")"
        walls+=("${wall:-0}")
        # decode speed where the step prints one: gkq generate's "generation: ... tokens/s" line, llama-bench's tg row
        local rate
        rate="$( (awk '/^generation:/ {print $(NF - 1)}' "$log"; awk -F'|' '/\| *tg[0-9]+ *\|/ {split($(NF - 1), v, " "); print v[1]}' "$log") | tail -n 1)"
        if [ -n "$rate" ]; then rates+=("$rate"); fi
        if [ "${rss_kb:-0}" -gt "$peak" ]; then peak="$rss_kb"; fi
        if [ -n "$note" ]; then break; fi
    done
    local median
    median="$(printf '%s\n' "${walls[@]}" | sort -g | awk '{a[NR] = $1} END {m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.2f", m}')"
    local rate_median=""
    if [ "${#rates[@]}" -gt 0 ]; then
        rate_median="$(printf '%s\n' "${rates[@]}" | sort -g | awk '{a[NR] = $1} END {m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.2f", m}')"
    fi
    printf '%s|%s|%.0f|%s|%s\n' "$name" "$median" "$((peak / 1024))" "$rate_median" "$note" >>"$work/rows"
}

echo "# scale benchmark: ${model:-$like, layers ${layers} (0: all)}, $threads threads, $runs runs per step, $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$work/rows"

if [ -n "$model" ]; then
    ln -sfn "$(cd "$model" && pwd)" "$work/model"
    echo "# model: $model (given; --like and --layers not used)"
else
    "$gkq" synth --like "$like" --layers "$layers" --dtype bf16 -o "$work/model" >/dev/null
fi
text="$work/text.txt"
# The eval text, which the tokenizer of a synthetic model can encode (its vocabulary has the 256 byte pieces).
for i in $(seq 1 $((eval_bytes / 60 + 1))); do echo "The quick brown fox jumps over the lazy dog, line $i of the scale benchmark."; done >"$text.full"
head -c "$eval_bytes" "$text.full" >"$text"

want inspect && measure "gkq inspect" "$gkq" inspect "$work/model"
# --no-cache: the spectra cache beside a given model would make the second run a file read
want analyze && measure "gkq analyze --topk 64" "$gkq" analyze "$work/model" --topk 64 --threads "$threads" --no-cache \
    --json -o "$work/analyze.json"
want quantize && measure "gkq quantize --preset q4_0" "$gkq" quantize "$work/model" --preset q4_0 --threads "$threads" \
    -o "$work/q4_0.knot"
want quantize-k && measure "gkq quantize --preset q4_k_m" "$gkq" quantize "$work/model" --preset q4_k_m \
    --threads "$threads" -o "$work/q4_k_m.knot"
want generate-model &&
    measure "gkq generate (bf16 model, 64 tokens)" "$gkq" generate "$work/model" -n 64 --temp 0 --threads "$threads"
want generate-knot &&
    measure "gkq generate (q4_0 knot, 64 tokens)" "$gkq" generate "$work/q4_0.knot" -n 64 --temp 0 --threads "$threads"
# serve_run KNOT CACHE_MB: starts `gkq serve` on a free port, waits until /ready, sends 3 greedy /infer requests of
# 32 tokens one after another, keeps the last answer's tokens/s and the cache's hit rate in $work/serve.last, then
# SIGTERM drains it (exit 0). Run under measure, so its RSS is the server's own.
serve_run() {
    local knot="$1" cache_mb="$2" err="$work/serve.err" port="" i
    # --on-disk: records read from the mapped knot when the cache loads them (the default copies the whole knot into
    # RAM first, which no budget below the model can then bound)
    "$gkq" serve --weights "$knot" --on-disk --port 0 --cache-mb "$cache_mb" --workers 1 --threads "$threads" 2>"$err" &
    local spid=$!
    while [ -z "$port" ]; do
        port="$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$err" | head -n 1)"
        kill -0 "$spid" 2>/dev/null || { cat "$err" >&2; return 1; }
        [ -n "$port" ] || sleep 0.1  # a poll for the port line, not a timing
    done
    until curl -sf "http://127.0.0.1:$port/ready" >/dev/null; do
        kill -0 "$spid" 2>/dev/null || { cat "$err" >&2; return 1; }
        sleep 0.2  # waiting for the weights to load, not a timing
    done
    local body='{"prompt":"The quick brown fox","max_tokens":32,"temperature":0}' answer=""
    for i in 1 2 3; do answer="$(curl -sf -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$port/infer")" || { kill "$spid"; return 1; }; done
    local rate hit
    rate="$(printf '%s' "$answer" | sed -n 's/.*"tokens_per_second":\([0-9.e+-]*\).*/\1/p')"
    hit="$(curl -sf "http://127.0.0.1:$port/ready" | sed -n 's/.*"hit_rate":\([0-9.e+-]*\).*/\1/p')"
    echo "cache hit rate: $hit" >"$work/serve.hit"
    echo "generation: 32 tokens, $rate tokens/s"
    kill -TERM "$spid"
    wait "$spid"
}

# the candidate as gkq generate runs it (Q8_0 activations): eval's float32 default is several times slower at 8 B
want eval && measure "gkq eval (q4_0 knot vs bf16, ${eval_bytes} bytes)" "$gkq" eval --base "$work/model" --candidate "$work/q4_0.knot" --text "$text" --threads "$threads" --activations q8

# /usr/bin/time runs a program, so the function runs in a child bash; its peak RSS is that of the largest process
# it waited for (the server).
export -f serve_run
export gkq work threads
if want serve; then
    measure "gkq serve (q4_0 knot, ${serve_cache_mb} MB cache, 3x32 tokens)" bash -c 'serve_run "$0" "$1"' \
        "$work/q4_0.knot" "$serve_cache_mb"
    [ -f "$work/serve.hit" ] && echo "# serve: $(cat "$work/serve.hit") after the 3 requests (/ready)"
fi

if ! want llama; then
    echo "# llama.cpp rows left out: not in --steps"
elif [ -n "$llama_bin" ]; then
    # The same weights as GGUF, written by gkq (reconstruct of a lossless knot would decode to f32: convert the
    # bf16 model directly when gkq has an export command, else say so).
    if "$gkq" export --help >/dev/null 2>&1; then
        "$gkq" export "$work/model" -o "$work/model-bf16.gguf" --keep >/dev/null
        measure "llama-quantize Q4_0" "$llama_bin/llama-quantize" "$work/model-bf16.gguf" "$work/model-q4_0.gguf" Q4_0 "$threads"
        if want quantize-k; then
            measure "llama-quantize Q4_K_M" "$llama_bin/llama-quantize" "$work/model-bf16.gguf" "$work/model-q4_k_m.gguf" \
                Q4_K_M "$threads"
        fi
        measure "llama-bench -n 64 (Q4_0)" "$llama_bin/llama-bench" -m "$work/model-q4_0.gguf" -p 0 -n 64 -t "$threads" -r 1
        measure "llama-bench -n 64 (bf16)" "$llama_bin/llama-bench" -m "$work/model-bf16.gguf" -p 0 -n 64 -t "$threads" -r 1
    else
        echo "# llama.cpp rows left out: this gkq has no 'export' command to write the bf16 model as GGUF"
    fi
else
    echo "# llama.cpp rows left out: no --llama-bin given"
fi

echo
echo "| step | wall s (median) | peak RSS MiB | decode tokens/s (median) | note |"
echo "|---|---:|---:|---:|---|"
awk -F'|' '{printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5}' "$work/rows"
echo
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
