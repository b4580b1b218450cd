#!/usr/bin/env bash
# Quality side by side with llama.cpp, in one run (issue 17, "Measured against llama.cpp in the same run").
#
# usage: packaging/bench/quality_vs_llamacpp.sh [--gkq BIN] --llama-bin DIR [--models "NAMES"] [--ctx N]
#            [--text F] [--calib F] [--threads N] [--shared DIR] [--out DIR]
#   --gkq BIN       the gkq binary (default: build/app/gkq of this source tree)
#   --llama-bin DIR folder holding llama.cpp's llama-quantize, llama-imatrix and llama-perplexity (required)
#   --models NAMES  any of: demo llama2xs-279K babyllama-tok105 (default: all three; the shared ones are skipped with
#                   a line when ../shared/models, or $GKQ_SHARED_MODELS, does not hold them)
#   --ctx N         context of every measurement and of both imatrix runs (default 128)
#   --text F        held-out text for every model (default: the first 6,144 bytes of resources/demo/heldout.txt for
#                   the demo model; packaging/bench/data/stories-heldout.txt for the TinyStories checkpoints)
#   --calib F       calibration text for both imatrix tools (default: the last 6,144 bytes of
#                   resources/demo/heldout.txt for the demo model, disjoint from its held-out slice;
#                   tests/data/imatrix/calib.txt for the TinyStories checkpoints)
#   --threads N     threads of every tool (default 1: on a machine whose cores are busy, llama.cpp's spinning worker
#                   threads made its runs 10x slower at 2 threads than at 1)
#   --shared DIR    the shared checkpoints' folder (default: $GKQ_SHARED_MODELS, else ../shared/models)
#   --out DIR       keep every file (GGUFs, knots, imatrix files, logs) in DIR (default: a temporary folder, removed)
#
# Per model: the F32 GGUF (`gkq export MODEL --dense f32`, the weights exactly as stored) is the base of both tools.
# llama-quantize makes Q8_0 Q4_0 Q4_K_M Q5_K_M Q6_K Q3_K_M Q2_K IQ4_NL from it, without and with an importance
# matrix that llama-imatrix computed from the calibration text; gkq makes the same types with `gkq export --type`
# (which takes no importance matrix), its knot presets (q8_0 q4_0 lowrank-q4 svd-energy paper q4_k_m q2_k, and
# svd-plain beside svd-llm with gkq imatrix's Gram matrices: the same rank, 20 % fewer parameters),
# q4_0 / lowrank-q4 / q4_k_m / q2_k with `quantize --imatrix` on either tool's imatrix file of the same text, and
# `quantize --target-bpw` at the bits per weight of llama-quantize's Q4_K_M and Q2_K files, the smaller of each type's
# two (without and with an imatrix), less 0.1 for the knot's headers, then once moved by what the first knot came out
# above the reference or more than 0.02 below it, with gkq imatrix's file, without and with `--sensitivity-text` (each projection's effect on
# the output measured on the calibration text). Every GGUF is measured by
# `llama-perplexity --kl-divergence` (base log-probabilities from the F32 GGUF, --kl-divergence-base) and by
# `gkq eval --base MODEL --candidate FILE` on the same held-out text and context; a knot is measured by gkq eval as
# the knot, and by llama-perplexity as its `gkq export --dense f32` GGUF (the knot's decoded values, exactly).
# Prints Markdown tables on stdout, progress on stderr.
#
# What the two tools do differently (docs/quality.md says what it costs):
# - llama.cpp's CPU backend quantizes the activations to Q8_0 / Q8_K inside the dot products of quantized weights;
#   gkq eval multiplies f32 activations (weight-only error).
# - llama-perplexity cuts the token stream into chunks of --ctx tokens, replaces each chunk's first token by BOS and
#   scores only the second half of each chunk; gkq eval scores every token once over windows of --ctx (BOS + text)
#   starting every --ctx/2 tokens. Both use the same tokens' text, not always the same positions.
# - llama-perplexity stores the base log-probabilities as 16-bit codes (its --kl-divergence-base file).
# - Both run the KV cache in f32 here (-ctk f32 -ctv f32 -fa off), as gkq does.
# - llama.cpp runs with --no-repack (-nr): a build with GGML_NATIVE on a CPU that reports AMX repacks quantized
#   weights for AMX, which dies with SIGILL where the kernel does not grant AMX; without repacking it takes the AVX
#   paths.
# - llama.cpp's logger (common/log.cpp) writes from a worker thread and is never flushed at exit, so on a busy
#   machine the last lines (llama-perplexity's whole KLD summary) are lost; the script preloads a 6-line library,
#   compiled here with cc, whose destructor calls llama.cpp's own common_log_flush(common_log_main()).
#
# llama.cpp is not part of this project and is never built by it. Build its tools out of tree, e.g. from the source
# bundled in the node-llama-cpp npm package or a clone of github.com/ggml-org/llama.cpp:
#   cmake -S LLAMA_SRC -B /tmp/llama-tools -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF
#   cmake --build /tmp/llama-tools --target llama-quantize llama-imatrix llama-perplexity
# and pass --llama-bin /tmp/llama-tools/bin. Without them the script exits 77 with this message.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
gkq="$root/build/app/gkq"
llama_bin=""
models_wanted="demo llama2xs-279K babyllama-tok105"
ctx=128
text_all=""
calib_all=""
threads=1
out=""
shared="${GKQ_SHARED_MODELS:-$root/../shared/models}"

die() {
    echo "quality_vs_llamacpp: $*" >&2
    exit 2
}
while [[ $# -gt 0 ]]; do
    case "$1" in
        --gkq) gkq="$2"; shift 2 ;;
        --llama-bin) llama_bin="$2"; shift 2 ;;
        --models) models_wanted="$2"; shift 2 ;;
        --ctx) ctx="$2"; shift 2 ;;
        --text) text_all="$2"; shift 2 ;;
        --calib) calib_all="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --shared) shared="$2"; shift 2 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

how_to_build() {
    echo "quality_vs_llamacpp: SKIP: $1" >&2
    sed -n '/^# llama.cpp is not part/,/^# and pass/p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 77
}
[[ -n "$llama_bin" ]] || how_to_build "no --llama-bin DIR given (llama.cpp's tools are needed)"
for t in llama-quantize llama-imatrix llama-perplexity; do
    [[ -x "$llama_bin/$t" ]] || how_to_build "no $t in $llama_bin"
done
[[ -x "$gkq" ]] || die "no gkq binary at $gkq (build it, or pass --gkq BIN)"
command -v jq >/dev/null || die "jq is needed to read gkq's JSON reports (Debian package jq)"
[[ "$ctx" =~ ^[0-9]+$ && "$ctx" -ge 8 ]] || die "--ctx $ctx: a whole number >= 8"
[[ -z "$text_all" || -f "$text_all" ]] || die "--text $text_all: no such file"
[[ -z "$calib_all" || -f "$calib_all" ]] || die "--calib $calib_all: no such file"
if [[ -n "$text_all" && -n "$calib_all" ]] && cmp -s "$text_all" "$calib_all"; then
    die "the calibration text and the held-out text are the same file"
fi

if [[ -z "$out" ]]; then
    out="$(mktemp -d /tmp/quality-XXXXXX)"
    trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
log() { echo "quality_vs_llamacpp: $*" >&2; }
# Runs a command with its output in a log; on failure shows the log's tail and stops.
run() {
    local logf="$1"
    shift
    if ! "$@" > "$logf" 2>&1; then
        echo "quality_vs_llamacpp: failed: $*" >&2
        tail -n 20 "$logf" >&2
        exit 1
    fi
}
LL=(-t "$threads" -ctk f32 -ctv f32 -fa off)
command -v cc >/dev/null || die "cc is needed to build the log-flushing preload for llama.cpp's tools (Debian gcc)"
cat > "$out/flush_llama_log.c" <<'EOF_C'
#define _GNU_SOURCE
#include <dlfcn.h>
__attribute__((destructor)) static void flush_llama_log(void) {
    void* (*log_main)(void) = (void* (*)(void))dlsym(RTLD_DEFAULT, "_Z15common_log_mainv");
    void (*log_flush)(void*) = (void (*)(void*))dlsym(RTLD_DEFAULT, "_Z16common_log_flushP10common_log");
    if (log_main && log_flush) log_flush(log_main());
}
EOF_C
cc -shared -fPIC -O2 -o "$out/flush_llama_log.so" "$out/flush_llama_log.c" -ldl || die "could not build the preload"
# llama.cpp's tools with their log flushed at exit and without AMX repacking
llama() {
    local tool="$1"
    shift
    local nr=(-nr)
    [[ $tool == llama-quantize || $tool == llama-tokenize ]] && nr=()
    LD_PRELOAD="$out/flush_llama_log.so" "$llama_bin/$tool" "${nr[@]}" "$@"
}

# llama-perplexity's KLD report -> "kld se|top se|ratio se"
llama_numbers() {
    local f="$1" kld top ratio
    kld="$(sed -n 's/^Mean    KLD: *\([-0-9.e+]*\) ± *\([-0-9.e+]*\).*/\1 \2/p' "$f" | tail -n 1)"
    top="$(sed -n 's/^Same top p: *\([0-9.]*\) ± *\([0-9.]*\) %.*/\1 \2/p' "$f" | tail -n 1)"
    ratio="$(sed -n 's/^Mean PPL(Q)\/PPL(base) *: *\([0-9.]*\) ± *\([0-9.]*\).*/\1 \2/p' "$f" | tail -n 1)"
    echo "$kld|$top|$ratio"
}
# gkq eval --json -> "kld se|top se|ratio se"
gkq_numbers() {
    jq -r '"\(.kld.mean) \(.kld.se)|\(.same_top.fraction * 100) \(.same_top.se * 100)|\(.ppl_ratio.value) \(.ppl_ratio.se)"' "$1"
}
# bits per weight of a file of $1 bytes over $2 parameters
bpw() { awk -v b="$1" -v n="$2" 'BEGIN { printf "%.3f", b * 8 / n }'; }
fmt_pm() { awk -v v="$1" -v s="$2" -v d="$3" 'BEGIN { printf "%." d "f ± %." d "f", v, s }'; }

# name|model|tokenizer|flatten newlines (a vocabulary without "\n")
all_models=("demo|$root/resources/demo|$root/resources/demo/tokenizer.bin|0"
    "llama2xs-279K|$shared/llama2xs-279K/model.bin|$shared/llama2xs-279K/tok512.bin|0"
    "babyllama-tok105|$shared/babyllama-tok105/model5000.bin|$shared/babyllama-tok105/tok105.bin|1")
LLAMA_TYPES="Q8_0 Q4_0 Q4_K_M Q5_K_M Q6_K Q3_K_M Q2_K IQ4_NL"
KNOT_PRESETS="q8_0 q4_0 lowrank-q4 svd-energy paper q4_k_m q2_k"
IMATRIX_PRESETS="q4_0 lowrank-q4 q4_k_m q2_k"
# quantize --target-bpw (with gkq imatrix's file) at the bits per weight of these llama-quantize files (the smaller
# of each type's two, without and with an imatrix), less this margin for the knot's headers
TARGET_BPW_AT="Q4_K_M Q2_K"
TARGET_BPW_MARGIN=0.1

llama_version="$("$llama_bin/llama-perplexity" --version 2>&1 | sed -n 's/^version: //p' | head -n 1 || true)"
echo "gkq: \`$gkq\`; llama.cpp: ${llama_version:-unknown version};" \
    "ctx $ctx; threads $threads; $(date -u '+%Y-%m-%d %H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo

for m in "${all_models[@]}"; do
    IFS='|' read -r name model tok flatten <<< "$m"
    [[ " $models_wanted " == *" $name "* ]] || continue
    if [[ ! -e "$model" || ! -f "$tok" ]]; then
        echo "$name: skipped (no $model or $tok)"
        echo
        continue
    fi
    d="$out/$name"
    mkdir -p "$d"
    # texts
    if [[ -n "$text_all" ]]; then
        cp "$text_all" "$d/text.raw"
    elif [[ $name == demo ]]; then
        head -c 6144 "$root/resources/demo/heldout.txt" > "$d/text.raw"
    else
        cp "$root/packaging/bench/data/stories-heldout.txt" "$d/text.raw"
    fi
    if [[ -n "$calib_all" ]]; then
        cp "$calib_all" "$d/calib.raw"
    elif [[ $name == demo ]]; then
        tail -c 6144 "$root/resources/demo/heldout.txt" > "$d/calib.raw"
    else
        cp "$root/tests/data/imatrix/calib.txt" "$d/calib.raw"
    fi
    for t in text calib; do
        if [[ $flatten == 1 ]]; then tr '\n' ' ' < "$d/$t.raw" > "$d/$t.txt"; else cp "$d/$t.raw" "$d/$t.txt"; fi
    done
    cmp -s "$d/text.txt" "$d/calib.txt" && die "$name: the calibration text and the held-out text are the same"

    log "$name: F32 GGUF, imatrix files"
    f32="$d/f32.gguf"
    run "$d/export-f32.log" "$gkq" export "$model" --dense f32 -o "$f32"
    n_params="$("$gkq" inspect "$f32" --json | jq '.n_params')"
    run "$d/llama-imatrix.log" llama llama-imatrix -m "$f32" -f "$d/calib.txt" -c "$ctx" -b "$ctx" --no-ppl \
        "${LL[@]}" -o "$d/llama.imatrix.gguf"
    run "$d/gkq-imatrix.log" "$gkq" imatrix "$model" --text "$d/calib.txt" --ctx "$ctx" --tokenizer "$tok" \
        --threads "$threads" -o "$d/gkq.imatrix.gguf" --gram "$d/gkq.gram.gguf"
    # same token stream? (llama-tokenize adds BOS as llama-perplexity does; gkq tokenize too)
    same_tokens="not checked (no llama-tokenize)"
    if [[ -x "$llama_bin/llama-tokenize" ]]; then
        llama llama-tokenize -m "$f32" -f "$d/text.txt" --ids --log-disable 2> /dev/null |
            tr -d '[] \n' | tr ',' '\n' > "$d/ids.llama" || true
        echo >> "$d/ids.llama"
        "$gkq" tokenize "$f32" -f "$d/text.txt" --json | jq -r '.ids[]' > "$d/ids.gkq"
        if cmp -s "$d/ids.llama" "$d/ids.gkq"; then
            same_tokens="identical ($(wc -l < "$d/ids.gkq") tokens, BOS included)"
        else
            same_tokens="DIFFERENT (llama.cpp $(wc -l < "$d/ids.llama"), gkq $(wc -l < "$d/ids.gkq") tokens)"
        fi
    fi

    log "$name: base logits"
    run "$d/llama-base.log" llama llama-perplexity -m "$f32" -f "$d/text.txt" -c "$ctx" -b "$ctx" "${LL[@]}" \
        --kl-divergence-base "$d/base.kld"
    base_ppl_llama="$(sed -n 's/.*Final estimate: PPL = *\([0-9.]*\).*/\1/p' "$d/llama-base.log")"
    run "$d/gkq-base.log" "$gkq" eval --base "$model" --candidate "$f32" --text "$d/text.txt" --ctx "$ctx" \
        --tokenizer "$tok" --threads "$threads" --save-base "$d/base.gkqlogits" --json
    cp "$d/gkq-base.log" "$d/f32.gkqeval.json"

    # rows: label|file for llama-perplexity|file for gkq eval|bytes|bytes in memory (knot payloads inflated)|who made it
    rows=()
    for t in $LLAMA_TYPES; do
        lt="$(tr 'A-Z' 'a-z' <<< "$t")"
        run "$d/lq-$lt.log" llama llama-quantize "$f32" "$d/lq-$lt.gguf" "$t" "$threads"
        rows+=("llama-quantize $t|$d/lq-$lt.gguf|$d/lq-$lt.gguf|$(stat -c %s "$d/lq-$lt.gguf")||llama")
        run "$d/lqi-$lt.log" llama llama-quantize --imatrix "$d/llama.imatrix.gguf" "$f32" \
            "$d/lqi-$lt.gguf" "$t" "$threads"
        rows+=("llama-quantize $t + imatrix|$d/lqi-$lt.gguf|$d/lqi-$lt.gguf|$(stat -c %s "$d/lqi-$lt.gguf")||llama")
        log "$name: $t"
    done
    for t in $LLAMA_TYPES; do
        lt="$(tr 'A-Z' 'a-z' <<< "$t")"
        run "$d/gx-$lt.log" "$gkq" export "$model" --type "$lt" -o "$d/gx-$lt.gguf"
        rows+=("gkq export --type $lt|$d/gx-$lt.gguf|$d/gx-$lt.gguf|$(stat -c %s "$d/gx-$lt.gguf")||gkq")
    done
    log "$name: gkq export --type done"
    knots=()
    skipped=()
    for p in $KNOT_PRESETS; do knots+=("$p|$p||"); done
    for p in $IMATRIX_PRESETS; do knots+=("$p + gkq imatrix|$p|$d/gkq.imatrix.gguf|gi"); done
    for p in $IMATRIX_PRESETS; do knots+=("$p + llama-imatrix file|$p|$d/llama.imatrix.gguf|li"); done
    # spectral compression done plainly and as the data sees it, at the same rank (a 20 % parameter reduction)
    knots+=("svd-plain (20 % fewer parameters)|svd-plain||")
    knots+=("svd-llm (20 % fewer, whitened) + gkq gram|svd-llm||gram|--gram $d/gkq.gram.gguf")
    for t in $TARGET_BPW_AT; do
        lt="$(tr 'A-Z' 'a-z' <<< "$t")"
        # the reference: the smaller of llama-quantize's two files of that type (without and with its imatrix), so
        # that the knot is compared at or below both
        ref="$(awk -v a="$(stat -c %s "$d/lq-$lt.gguf")" -v b="$(stat -c %s "$d/lqi-$lt.gguf")" -v n="$n_params" \
            'BEGIN { s = a < b ? a : b; printf "%.4f", 8 * s / n }')"
        # @B@: the budget, first the reference's bpw less TARGET_BPW_MARGIN, then (once) lowered by what the knot's
        # headers and tokenizer took above the reference on the first try
        knots+=("target-bpw @B@ (at $t's smaller file) + gkq imatrix|q4_k_m|$d/gkq.imatrix.gguf|tb-$lt|--target-bpw @B@|$ref")
        # the same budget with each matrix's effect on the output measured on the calibration text
        knots+=("target-bpw @B@ (at $t's smaller file) + gkq imatrix + output sensitivities|q4_k_m|$d/gkq.imatrix.gguf|tbs-$lt|--target-bpw @B@ --sensitivity-text $d/calib.txt --sensitivity-ctx $ctx|$ref")
    done
    for k in "${knots[@]}"; do
        IFS='|' read -r label p im tag extra ref <<< "$k"
        kn="$d/knot-$p${tag:+-$tag}.knot"
        im_args=()
        [[ -n "$im" ]] && im_args=(--imatrix "$im")
        if [[ -n "$ref" ]]; then
            # a budget below what the cheapest types need is refused by gkq: a row that says so, not the end of the run
            b="$(awk -v r="$ref" -v m="$TARGET_BPW_MARGIN" 'BEGIN { printf "%.3f", r - m }')"
            # The second try moves the budget by what the first knot came out above the reference, or below it by
            # more than 0.02 bpw (the margin is a guess at the headers' share, too large for a small model); a second
            # knot over the reference gives way to a first one under it.
            made=0
            kept_b=""
            over=0
            for attempt in 1 2; do
                # shellcheck disable=SC2206 # the extra arguments are words
                args=("${im_args[@]}" ${extra//@B@/$b})
                if ! "$gkq" quantize "$model" -o "$kn" --preset "$p" --tokenizer "$tok" --threads "$threads" \
                    "${args[@]}" > "${kn%.knot}.quantize.log" 2>&1; then
                    made=0
                    break
                fi
                made=1
                over="$("$gkq" inspect "$kn" --json | jq --argjson n "$n_params" --argjson r "$ref" \
                    '(.file_bytes - ([.records[].stored_bytes] | add) + ([.records[].raw_bytes] | add)) * 8 / $n - $r')"
                if awk -v o="$over" 'BEGIN { exit !(o <= 0 && o >= -0.02) }' || [[ $attempt == 2 ]]; then break; fi
                if awk -v o="$over" 'BEGIN { exit !(o <= 0) }'; then
                    cp "$kn" "$kn.first"
                    kept_b=$b
                fi
                b="$(awk -v b="$b" -v o="$over" 'BEGIN { printf "%.3f", b - o - 0.005 }')"
                made=0
            done
            if [[ -n "$kept_b" ]] && { [[ $made == 0 ]] || awk -v o="$over" 'BEGIN { exit !(o > 0) }'; }; then
                mv "$kn.first" "$kn"
                b=$kept_b
                made=1
            fi
            rm -f "$kn.first"
            label="${label//@B@/$b}"
            if [[ $made == 0 ]]; then
                skipped+=("gkq knot $label: $(grep -v '^imatrix:' "${kn%.knot}.quantize.log" | tail -n 1)")
                log "$name: knot $label refused by gkq (see the table's notes)"
                continue
            fi
        else
            # shellcheck disable=SC2206 # the extra arguments are words
            [[ -n "$extra" ]] && im_args+=($extra)
            run "${kn%.knot}.quantize.log" "$gkq" quantize "$model" -o "$kn" --preset "$p" --tokenizer "$tok" \
                --threads "$threads" "${im_args[@]}"
        fi
        run "${kn%.knot}.export.log" "$gkq" export "$kn" --dense f32 -o "${kn%.knot}.gguf"
        "$gkq" inspect "$kn" --json > "${kn%.knot}.inspect.json"
        bytes="$(jq '.file_bytes' "${kn%.knot}.inspect.json")"
        mem="$(jq '.file_bytes - ([.records[].stored_bytes] | add) + ([.records[].raw_bytes] | add)' \
            "${kn%.knot}.inspect.json")"
        rows+=("gkq knot $label|${kn%.knot}.gguf|$kn|$bytes|$mem|gkq")
        log "$name: knot $label"
    done

    log "$name: measuring ${#rows[@]} files with both tools"
    table=()
    : > "$d/rows.tsv"
    for r in "${rows[@]}"; do
        IFS='|' read -r label lfile gfile bytes mem origin <<< "$r"
        key="$(basename "${gfile%.*}")"
        run "$d/$key.lkld.log" llama llama-perplexity -m "$lfile" -c "$ctx" -b "$ctx" "${LL[@]}" \
            --kl-divergence-base "$d/base.kld" --kl-divergence
        run "$d/$key.geval.json" "$gkq" eval --candidate "$gfile" --base-logits "$d/base.gkqlogits" --base "$model" \
            --text "$d/text.txt" --ctx "$ctx" --tokenizer "$tok" --threads "$threads" --json
        IFS='|' read -r lk lt lr <<< "$(llama_numbers "$d/$key.lkld.log")"
        IFS='|' read -r gk gt gr <<< "$(gkq_numbers "$d/$key.geval.json")"
        read -r lkv lks <<< "$lk"
        read -r gkv gks <<< "$gk"
        read -r ltv lts <<< "$lt"
        read -r gtv gts <<< "$gt"
        read -r lrv lrs <<< "$lr"
        read -r grv grs <<< "$gr"
        b="$(bpw "$bytes" "$n_params")"
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$origin" "$b" "$(bpw "${mem:-$bytes}" "$n_params")" "$lkv" "$gkv" \
            >> "$d/rows.tsv"
        [[ -n "$mem" && "$mem" != "$bytes" ]] && b="$b ($(bpw "$mem" "$n_params") inflated)"
        ratio="$(awk -v a="$gkv" -v b="$lkv" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "-" }')"
        table+=("| $label | $b | $(fmt_pm "$lkv" "$lks" 5) | $(fmt_pm "$gkv" "$gks" 5) | $ratio |"\
" $(fmt_pm "$ltv" "$lts" 2) | $(fmt_pm "$gtv" "$gts" 2) | $(fmt_pm "$lrv" "$lrs" 4) | $(fmt_pm "$grv" "$grs" 4) |")
    done

    base_ppl_gkq="$(jq -r '.base_perplexity.perplexity' "$d/f32.gkqeval.json")"
    echo "### $name"
    echo
    echo "$n_params parameters; F32 GGUF $(stat -c %s "$f32") bytes ($(bpw "$(stat -c %s "$f32")" "$n_params") bpw);" \
        "held-out text $(wc -c < "$d/text.txt") bytes, calibration text $(wc -c < "$d/calib.txt") bytes;" \
        "tokens of the held-out text: $same_tokens; PPL(base): llama.cpp $base_ppl_llama, gkq $base_ppl_gkq."
    echo
    echo "| file | bpw (whole file) | mean KLD llama.cpp | mean KLD gkq eval | gkq / llama.cpp | same top p llama.cpp % | same top p gkq % | PPL(Q)/PPL(base) llama.cpp | PPL(Q)/PPL(base) gkq |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    printf '%s\n' "${table[@]}"
    echo
    if [[ ${#skipped[@]} -gt 0 ]]; then
        echo "Not made:"
        printf -- '- %s\n' "${skipped[@]}"
        echo
    fi
    echo "Targets (bpw of a knot: in memory, payloads inflated; KLD ratios by each tool, gkq eval's first):"
    echo
    echo "| target | llama.cpp reference: bpw, KLD llama.cpp / gkq | gkq's lowest KLD at or below that bpw | bpw | KLD llama.cpp / gkq | ratio by gkq eval / by llama.cpp | met (<= 0.7) |"
    echo "|---|---|---|---:|---:|---:|---|"
    for ref in "llama-quantize Q4_K_M + imatrix" "llama-quantize Q2_K" "llama-quantize Q2_K + imatrix"; do
        awk -F'\t' -v ref="$ref" '
            { label[NR] = $1; origin[NR] = $2; mem[NR] = $4 + 0; lk[NR] = $5 + 0; gk[NR] = $6 + 0; if ($1 == ref) r = NR }
            END {
                if (!r) exit
                best = 0
                for (i = 1; i <= NR; ++i)
                    if (origin[i] == "gkq" && mem[i] <= mem[r] && (!best || gk[i] < gk[best])) best = i
                printf "| <= 0.7x %s | %.3f bpw, %.5f / %.5f | ", ref, mem[r], lk[r], gk[r]
                if (!best) { printf "none at or below %.3f bpw | | | | no |\n", mem[r]; exit }
                rg = gk[best] / gk[r]; rl = lk[best] / lk[r]
                printf "%s | %.3f | %.5f / %.5f | %.3f / %.3f | %s |\n", label[best], mem[best], lk[best], gk[best], rg, rl,
                    (rg <= 0.7 && rl <= 0.7) ? "yes" : "no"
            }' "$d/rows.tsv"
    done
    awk -F'\t' '$1 ~ /^gkq knot svd-plain/ { p = $6; pl = $5 } $1 ~ /^gkq knot svd-llm/ { w = $6; wl = $5 }
        END { if (p > 0 && w > 0 && pl > 0)
                  printf "\nWhitened vs plain SVD at the same rank (20 %% fewer parameters): mean KLD %.5f vs %.5f by gkq eval (%.3fx), %.5f vs %.5f by llama.cpp (%.3fx).\n", w, p, w / p, wl, pl, wl / pl }' \
        "$d/rows.tsv"
    awk -F'\t' '$1 !~ /q8_0|Q8_0|Q6_K|q6_k/ && $5 > 0 { n++; r = $6 / $5; if (r >= 0.95 && r <= 1.05) k++; if (r < lo || !lo) lo = r; if (r > hi) hi = r }
        END { printf "\nSame file, both tools: %d of %d files other than the Q8_0 and Q6_K ones have gkq / llama.cpp mean KLD within 5 %% (range %.3f .. %.3f).\n", k, n, lo, hi }' \
        "$d/rows.tsv"
    echo
done
