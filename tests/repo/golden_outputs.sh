#!/usr/bin/env bash
# Golden outputs: what `gkq` writes and prints for fixed inputs, as sha256 lines compared with
# tests/repo/golden/expected.txt. A refactor that must not change behaviour (issue #14: "knot files
# byte-identical, every CLI's stdout unchanged") keeps this test green; a change that is meant to alter an
# output updates the expected file in the same commit, and the commit says why (--update rewrites it).
#
# usage: golden_outputs.sh GKQ SOURCE_DIR [--update]
# Inputs: the bundled demo model (always) and the checkpoints in SOURCE_DIR/../shared/models, or in
# $GKQ_SHARED_MODELS when set (when present; their lines are skipped, and said so, without them). Timings are never part of an output compared here:
# a `"seconds":` line is dropped before hashing, and so are the paths of this checkout and of the scratch folder.
set -euo pipefail
gkq="$1"
src="$(cd "$2" && pwd -P)"  # absolute: it is replaced in outputs (a relative "." would match every character)
update="${3:-}"
expected="$src/tests/repo/golden/expected.txt"
shared="${GKQ_SHARED_MODELS:-$src/../shared/models}"
work=$(mktemp -d /tmp/gkq-golden-XXXXXX)
trap 'rm -rf "$work"' EXIT
actual="$work/actual.txt"
: >"$actual"

# line NAME FILE: records "NAME sha256"; the NAME column keeps the report readable when a line differs.
line() { printf '%s %s\n' "$1" "$(sha256sum <"$2" | cut -d' ' -f1)" >>"$actual"; }
# run NAME CMD...: stdout of a command that must succeed.
run() {
    local name="$1"
    shift
    if ! "$@" >"$work/out" 2>"$work/err"; then
        echo "golden: '$name' failed: $*" >&2
        cat "$work/err" >&2
        exit 1
    fi
    # paths differ between checkouts and runs, seconds between runs: replaced / dropped before hashing
    sed -e "s|$work|WORK|g" -e "s|$shared|SRC/../shared/models|g" -e "s|$src|SRC|g" -e '/"seconds":/d' "$work/out" >"$work/out.norm"
    line "$name" "$work/out.norm"
}

demo="$src/resources/demo/model.safetensors"
models=("demo:$demo")
if [ -d "$shared" ]; then
    models+=("llama2xs:$shared/llama2xs-279K/model.bin" "babyllama:$shared/babyllama-tok105/model5000.bin")
else
    echo "golden: $shared absent, the shared checkpoints' lines are not checked" >&2
fi

for entry in "${models[@]}"; do
    name="${entry%%:*}"
    path="${entry#*:}"
    run "$name.inspect" "$gkq" inspect "$path"
    run "$name.inspect.json" "$gkq" inspect --json "$path"
done

# The codec: every preset on the demo model, the knot's bytes and verify's report.
for preset in paper q8_0 q4_0 lowrank-q4 svd-energy; do
    knot="$work/demo-$preset.knot"
    "$gkq" quantize "$demo" --preset "$preset" --threads 2 -o "$knot" >/dev/null 2>"$work/err" ||
        { cat "$work/err" >&2; exit 1; }
    line "demo.quantize.$preset.knot" "$knot"
done
for entry in "${models[@]:1}"; do
    name="${entry%%:*}"
    path="${entry#*:}"
    "$gkq" quantize "$path" --preset q4_0 --threads 2 -o "$work/$name.knot" >/dev/null 2>"$work/err" ||
        { cat "$work/err" >&2; exit 1; }
    line "$name.quantize.q4_0.knot" "$work/$name.knot"
done

knot="$work/demo-lowrank-q4.knot"
run "demo.verify.lowrank-q4" "$gkq" verify "$knot"
for ext in gguf safetensors bin; do
    mkdir -p "$work/rec-$ext"
    "$gkq" reconstruct "$knot" -o "$work/rec-$ext/model.$ext" >/dev/null 2>"$work/err" ||
        { cat "$work/err" >&2; exit 1; }
    line "demo.reconstruct.lowrank-q4.$ext" "$work/rec-$ext/model.$ext"
done

# Inference: greedy continuations from the model and from a knot, and an evaluation report.
for entry in "${models[@]}"; do
    name="${entry%%:*}"
    path="${entry#*:}"
    run "$name.generate" "$gkq" generate "$path" --prompt "Once upon a time" --steps 24 --temp 0 --seed 1 --threads 2
done
run "demo.generate.knot" "$gkq" generate "$knot" --tokenizer "$src/resources/demo/tokenizer.bin" --prompt "Once upon a time" --steps 24 --temp 0 --seed 1 --threads 2
head -c 4096 "$src/resources/demo/heldout.txt" >"$work/text.txt"
run "demo.eval.lowrank-q4.json" "$gkq" eval --base "$demo" --candidate "$knot" --text "$work/text.txt" --ctx 128 \
    --threads 2 --json

if [ "$update" == "--update" ]; then
    mkdir -p "$(dirname "$expected")"
    cp "$actual" "$expected"
    echo "golden: wrote $expected ($(wc -l <"$expected") lines)"
    exit 0
fi
[ -f "$expected" ] || { echo "golden: $expected is missing (run with --update)"; exit 1; }
# Compare only the lines this run could produce (without ../shared the shared checkpoints' lines are absent).
fail=0
while read -r key sum; do
    want=$(awk -v k="$key" '$1 == k { print $2 }' "$expected")
    if [ -z "$want" ]; then
        echo "golden: $key has no expected value"
        fail=1
    elif [ "$want" != "$sum" ]; then
        echo "golden: $key differs from tests/repo/golden/expected.txt"
        fail=1
    fi
done <"$actual"
checked=$(wc -l <"$actual")
[ "$fail" -eq 0 ] || { echo "golden: FAILED (outputs in a kept copy: $work.kept)"; cp -r "$work" "$work.kept"; exit 1; }
echo "golden: $checked outputs identical to tests/repo/golden/expected.txt"
