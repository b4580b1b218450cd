#!/usr/bin/env bash
# Reproduces docs/presets-measured.md: every `gkq quantize` preset on the demo model and on the shared llama2.c
# checkpoints, each knot evaluated with `gkq eval` against its base model on held-out text.
#
# usage: packaging/measure-presets.sh [GKQ] [OUT_DIR]
#   GKQ      the gkq binary (default: build/app/gkq)
#   OUT_DIR  where knots, base logits and logs go (default: a temporary folder, removed afterwards)
# Environment: TEXT (default resources/demo/heldout.txt), BYTES (score only the first BYTES bytes of TEXT; 0 = all,
# default 0), CTX (default 256), THREADS (default 0 = all cores), SHARED (default ../shared/models), MODELS (names to
# run, default "demo llama2xs-279K babyllama-tok105"), HEADER (0: leave out the table header, default 1).
# Prints the markdown table on stdout; progress on stderr.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
gkq="${1:-$root/build/app/gkq}"
out="${2:-}"
text="${TEXT:-$root/resources/demo/heldout.txt}"
bytes="${BYTES:-0}"
ctx="${CTX:-256}"
threads="${THREADS:-0}"
shared="${SHARED:-$root/../shared/models}"

[[ -x "$gkq" ]] || { echo "measure-presets: no gkq binary at $gkq (build first or pass its path)" >&2; exit 2; }
[[ -f "$text" ]] || { echo "measure-presets: no text at $text" >&2; exit 2; }
if [[ -z "$out" ]]; then
    out="$(mktemp -d)"
    trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
if [[ "$bytes" != 0 ]]; then
    head -c "$bytes" "$text" > "$out/text.txt"
else
    cp "$text" "$out/text.txt"
fi

presets="$("$gkq" quantize --help | sed -n '/^presets:/,/^arguments:/s/^  \([a-z0-9_-]*\)$/\1/p' | tr '\n' ' ')"
[[ -n "$presets" ]] || presets="paper q8_0 q4_0 lowrank-q4 svd-energy"

# name|model|tokenizer
models=("demo|$root/resources/demo|$root/resources/demo/tokenizer.bin")
[[ -f "$shared/llama2xs-279K/model.bin" ]] &&
    models+=("llama2xs-279K|$shared/llama2xs-279K/model.bin|$shared/llama2xs-279K/tok512.bin")
[[ -f "$shared/babyllama-tok105/model5000.bin" ]] &&
    models+=("babyllama-tok105|$shared/babyllama-tok105/model5000.bin|$shared/babyllama-tok105/tok105.bin")

if [[ "${HEADER:-1}" != 0 ]]; then
echo "| model | preset | bits/weight | ratio vs bf16 | mean KLD ± SE | 99.9% KLD | same top p | PPL(Q)/PPL(base) | PPL(base) |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
fi
for m in "${models[@]}"; do
    IFS='|' read -r name model tok <<< "$m"
    [[ " ${MODELS:-demo llama2xs-279K babyllama-tok105} " == *" $name "* ]] || continue
    base_logits="$out/$name.base.logits"
    first=1
    for preset in $presets; do
        knot="$out/$name-$preset.knot"
        echo "measure-presets: $name $preset" >&2
        "$gkq" quantize "$model" -o "$knot" --preset "$preset" --tokenizer "$tok" --threads "$threads" \
            > "$out/$name-$preset.quantize.txt"
        total="$(grep '^total' "$out/$name-$preset.quantize.txt")"
        bpw="$(sed -n 's/.* = \([0-9.]*\) bits per weight.*/\1/p' <<< "$total")"
        ratio="$(sed -n 's/.*; \([0-9.]*\)x smaller than bf16.*/\1/p' <<< "$total")"
        if [[ $first == 1 ]]; then
            reuse=(--save-base "$base_logits")
            first=0
        else
            reuse=(--base-logits "$base_logits")
        fi
        "$gkq" eval --base "$model" --candidate "$knot" --text "$out/text.txt" --tokenizer "$tok" --ctx "$ctx" \
            --threads "$threads" "${reuse[@]}" > "$out/$name-$preset.eval.txt"
        e="$out/$name-$preset.eval.txt"
        kld="$(sed -n 's/^Mean    KLD: *\([-0-9.e]*\) ± *\([-0-9.e]*\).*/\1 ± \2/p' "$e")"
        p999="$(sed -n 's/^99.9%   KLD: *\([-0-9.e]*\).*/\1/p' "$e")"
        top="$(sed -n 's/^Same top p : *\([0-9.]*\) ± *\([0-9.]*\) %.*/\1 ± \2 %/p' "$e")"
        ppl="$(sed -n 's/^Mean PPL(Q)\/PPL(base) : *\([0-9.]*\) ± *\([0-9.]*\).*/\1 ± \2/p' "$e")"
        pplb="$(sed -n 's/^PPL(base) *: *\([0-9.]*\).*/\1/p' "$e")"
        echo "| $name | $preset | $bpw | $ratio | $kld | $p999 | $top | $ppl | $pplb |"
    done
done
