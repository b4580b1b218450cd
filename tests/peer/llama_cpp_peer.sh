#!/usr/bin/env bash
# CTest driver of the live llama.cpp peer test: GGUF files that `gkq export` writes (from the bundled demo model and
# the shared llama2xs checkpoint; F32, Q8_0, Q4_0, Q4_K_M from the model, the kept records of Q8_0, Q4_K_M, Q2_K and
# Q5_K_M knots, and a lowrank-q4 knot decoded to dense F16) are loaded by llama.cpp (node-llama-cpp 3.22.1 with its
# prebuilt CPU binaries, pinned by llama-cpp/package-lock.json), and its 16-token greedy continuation of a prompt must equal
# `gkq generate --temp 0` on the same file, as text. Then every forward-pass fixture model (test_forward_fixtures
# --write-models: each architecture row; GKQ_FORWARD_FIXTURES names that binary) and gkq's GGUF export of its HF copy
# run in llama.cpp with an f32 KV cache: their greedy continuations must equal the committed fixture's and
# `gkq generate --ids`'s; the llama fixture's HF copy with a tokenizer.json (byte-level BPE, byte-fallback BPE) instead
# of its tokenizer.bin, exported and quantized to a knot then exported, must tokenize in llama.cpp as in gkq and
# continue greedily the same. GKQ_SHARED_MODELS_DIR overrides where the shared models are.
# The packages are installed into DEPS_DIR with `npm install --ignore-scripts --omit=optional` from the committed
# lock (npm ci refuses the lock: it lists only the linux-x64 binaries, and npm ci wants every platform's optional
# package; the lock is compared afterwards so nothing unpinned slipped in).
# Exits 77 (skipped) with the reason when node/npm are missing or the packages are not installed and the registry
# cannot be reached. The shared checkpoint's cases are skipped (with a line saying so) when ../shared is absent.
# Not included: babyllama-tok105 (a character vocabulary without byte tokens): node-llama-cpp's addon aborts
# (std::out_of_range from llama.cpp's byte_to_token) while loading any GGUF whose vocabulary has no "\n" token, though
# llama.cpp itself loads the file (llama-tokenize gives gkq's ids).
#   llama_cpp_peer.sh GKQ SOURCE_DIR DEPS_DIR [--install-only]
set -euo pipefail
gkq=$1
src=$2
deps=$3
mode=${4:-}
pkg=$src/tests/peer/llama-cpp

node=$(command -v node || command -v nodejs || true)
if [ -z "$node" ]; then
    echo "SKIP: no node or nodejs on PATH (Debian package nodejs)"
    exit 77
fi

# ---- the pinned packages ----
mkdir -p "$deps"
stamp=$deps/node_modules/.gkq-package-lock.json
if ! cmp -s "$pkg/package-lock.json" "$stamp" || [ ! -d "$deps/node_modules/@node-llama-cpp/linux-x64" ]; then
    if ! command -v npm >/dev/null; then
        echo "SKIP: node-llama-cpp is not installed in $deps and there is no npm (Debian package npm)"
        exit 77
    fi
    if ! timeout 20 npm ping >/dev/null 2>&1; then
        echo "SKIP: node-llama-cpp is not installed in $deps and the npm registry is unreachable (npm ping failed);" \
             "run \`ninja llama_cpp_peer_deps\` where it is reachable"
        exit 77
    fi
    cp "$pkg/package.json" "$pkg/package-lock.json" "$deps/"
    (cd "$deps" && npm install --ignore-scripts --omit=optional --no-audit --no-fund)
    if ! cmp -s "$pkg/package-lock.json" "$deps/package-lock.json"; then
        echo "FAIL: npm install changed the pinned package-lock.json in $deps"
        exit 1
    fi
    cp "$pkg/package-lock.json" "$stamp"
fi
cp "$pkg/greedy.mjs" "$pkg/tokenize.mjs" "$pkg/hf_tokenizer.mjs" "$deps/"
[ "$mode" = "--install-only" ] && exit 0

work=$(mktemp -d /tmp/gkq-llama-peer-XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0
n_new=16

# near_tie NAME GGUF PROMPT-IDS N-PROMPT: after texts that differ, whether the first differing token was a near-tie
# in gkq's own logits (its greedy choice above llama.cpp's by at most 1e-3 of the logit range at that position),
# with every token before it the same. gkq generate quantizes Q8_0/Q4_0 activations as llama.cpp does, but rounds
# and sums in its own order (no fused multiply-add), so a tie that close may go either way; more is a real
# difference. Prints its verdict as ok (a near-tie) or the numbers for the FAIL line that follows.
near_tie() {
    local name=$1 gguf=$2 prompt_ids=$3 n_prompt=$4
    local llama_ids gkq_ids
    llama_ids=$(sed -n 1p "$work/$name.llama")
    gkq_ids=$("$gkq" generate "$gguf" --ids "$(tr ' ' , <<<"$prompt_ids")" --print-ids --temp 0 \
        -n $((n_prompt + n_new - 1)) --threads 1 2>/dev/null | tr , ' ') || return 1
    local verdict
    verdict=$(
        "$node" - "$n_prompt" "$llama_ids" "$gkq_ids" <<'JS'
const [n, l, g] = [Number(process.argv[2]), process.argv[3].trim().split(/\s+/).map(Number),
                   process.argv[4].trim().split(/\s+/).map(Number)];
const gen = g.slice(n);
let k = 0;
while (k < l.length && k < gen.length && l[k] === gen[k]) k++;
if (k >= l.length || k >= gen.length) { console.log("none"); process.exit(0); }
console.log([k, g.slice(0, n + k).join(","), gen[k], l[k]].join(" "));
JS
    ) || return 1
    [ "$verdict" != none ] || return 1
    local k prefix mine theirs
    read -r k prefix mine theirs <<<"$verdict"
    "$gkq" logits "$gguf" --ids "$prefix" -o "$work/$name.tie" --activations q8 >/dev/null 2>&1 || return 1
    local rows
    rows=$(tr , '\n' <<<"$prefix" | wc -l)
    "$node" - "$work/$name.tie" "$rows" "$mine" "$theirs" "$k" "$name" <<'JS'
const [file, rows, mine, theirs, k, name] = process.argv.slice(2);
const b = require("fs").readFileSync(file);
const f = new Float32Array(b.buffer, b.byteOffset, b.length / 4);
const vocab = f.length / Number(rows);
const last = f.subarray(f.length - vocab);
let hi = -Infinity, lo = Infinity;
for (const v of last) { hi = Math.max(hi, v); lo = Math.min(lo, v); }
const margin = last[Number(mine)] - last[Number(theirs)], tol = 1e-3 * (hi - lo);
const what = `new token ${k}: gkq's ${mine} over llama.cpp's ${theirs} by ${margin.toPrecision(3)} ` +
             `(tolerance ${tol.toPrecision(3)}, logit range ${(hi - lo).toPrecision(3)}); the ${k} before it agree`;
if (margin >= 0 && margin <= tol) { console.log(`ok   ${name}: a near-tie at ${what}`); process.exit(0); }
console.log(`     not a near-tie at ${what}`);
process.exit(1);
JS
}

# check NAME GGUF PROMPT: llama.cpp's greedy continuation of BOS + PROMPT's tokens against gkq generate's.
check() {
    local name=$1 gguf=$2 prompt=$3
    local ids
    ids=$("$gkq" tokenize "$gguf" --text "$prompt" --json |
        "$node" -e 'const j = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log(j.ids.join(" "))')
    local n_prompt
    n_prompt=$(wc -w <<<"$ids")
    if ! "$node" "$deps/greedy.mjs" "$gguf" "$n_new" $ids >"$work/$name.llama" 2>"$work/$name.err"; then
        echo "FAIL $name: llama.cpp did not run $gguf: $(tail -3 "$work/$name.err")"
        fails=$((fails + 1))
        return
    fi
    # run.c's -n counts positions: the prompt's n_prompt tokens (BOS included) and N new ones take n_prompt + N - 1
    "$gkq" generate "$gguf" -p "$prompt" --temp 0 -n $((n_prompt + n_new - 1)) --threads 1 >"$work/$name.gkq" 2>/dev/null
    local want got
    want=$(sed -n 2p "$work/$name.llama")
    got=$("$node" -e 'process.stdout.write(JSON.stringify(require("fs").readFileSync(0, "utf8").replace(/\n$/, "")))' \
        <"$work/$name.gkq")
    if [ "$want" = "$got" ]; then
        echo "ok   $name: $(sed -n 1p "$work/$name.llama" | wc -w) tokens: $want"
    elif near_tie "$name" "$gguf" "$ids" "$n_prompt"; then
        :
    else
        echo "FAIL $name: llama.cpp ids $(sed -n 1p "$work/$name.llama")"
        echo "     llama.cpp: $want"
        echo "     gkq:       $got"
        fails=$((fails + 1))
    fi
}

# export_and_check NAME SOURCE PROMPT EXPORT-ARGS...
export_and_check() {
    local name=$1 source=$2 prompt=$3
    shift 3
    if ! "$gkq" export "$source" -o "$work/$name.gguf" "$@" >"$work/$name.export" 2>&1; then
        echo "FAIL $name: gkq export $source $*: $(tail -3 "$work/$name.export")"
        fails=$((fails + 1))
        return
    fi
    check "$name" "$work/$name.gguf" "$prompt"
}

demo=$src/resources/demo
prompt_demo="The best way to"
for t in f32 q8_0 q4_0 q4_k_m; do export_and_check "demo-$t" "$demo" "$prompt_demo" --type "$t"; done
"$gkq" quantize "$demo" --preset q8_0 --threads 2 -o "$work/demo-q8_0.knot" >/dev/null
export_and_check "demo-knot-q8_0" "$work/demo-q8_0.knot" "$prompt_demo" --keep
"$gkq" quantize "$demo" --preset lowrank-q4 --threads 2 -o "$work/demo-lowrank-q4.knot" >/dev/null
export_and_check "demo-knot-lowrank-q4-f16" "$work/demo-lowrank-q4.knot" "$prompt_demo" --dense f16
# llama.cpp's k-quant mixtures as knot presets: the records' blocks go into the GGUF as they are
for p in q4_k_m q2_k; do
    "$gkq" quantize "$demo" --preset "$p" --threads 2 -o "$work/demo-$p.knot" >/dev/null
    export_and_check "demo-knot-$p" "$work/demo-$p.knot" "$prompt_demo" --keep
done

shared=${GKQ_SHARED_MODELS_DIR:-$src/../shared/models}/llama2xs-279K/model.bin
if [ -f "$shared" ]; then
    for t in f32 q8_0 q4_0 q4_k_m; do export_and_check "llama2xs-$t" "$shared" "Once upon a time" --type "$t"; done
    "$gkq" quantize "$shared" --preset q5_k_m --threads 2 -o "$work/llama2xs-q5_k_m.knot" >/dev/null
    export_and_check "llama2xs-knot-q5_k_m" "$work/llama2xs-q5_k_m.knot" "Once upon a time" --keep
else
    echo "skipped: $shared is absent (the shared checkpoints are not next to this checkout)"
fi

# ---- the forward-pass fixture models, live: llama.cpp itself on the GGUFs gkq writes, and on gkq's export of each
# model's HF copy. GKQ_FORWARD_FIXTURES names the test_forward_fixtures binary (CTest sets it); every model it writes
# must give, in llama.cpp with an f32 KV cache, the greedy continuation its committed fixture holds
# (tests/data/forward/NAME.logits, the continuation gkq's test_forward_fixtures also matches), and so must
# `gkq generate --ids` on the same file.
fixture_ints() {  # FILE OFFSET COUNT: COUNT little-endian int32 at OFFSET
    od -An -v -j "$2" -N $((4 * $3)) -t d4 "$1" | xargs
}
forward_check() {  # NAME GGUF FIXTURE
    local name=$1 gguf=$2 fixture=$3
    local n_tok n_vocab n_gen tokens want got gkq_ids
    n_tok=$(fixture_ints "$fixture" 8 1)
    n_vocab=$(fixture_ints "$fixture" 12 1)
    n_gen=$(fixture_ints "$fixture" 16 1)
    tokens=$(fixture_ints "$fixture" 20 "$n_tok")
    want=$(fixture_ints "$fixture" $((20 + 4 * n_tok + 4 * n_tok * n_vocab)) "$n_gen")
    if ! "$node" "$deps/greedy.mjs" --f32-kv "$gguf" "$n_gen" $tokens >"$work/$name.llama" 2>"$work/$name.err"; then
        echo "FAIL $name: llama.cpp did not run $gguf: $(tail -3 "$work/$name.err")"
        fails=$((fails + 1))
        return
    fi
    got=$(sed -n 1p "$work/$name.llama")
    # --print-ids prints the prompt's ids and the generated ones, comma-separated; -n counts the positions run
    gkq_ids=$("$gkq" generate "$gguf" --ids "$(tr ' ' , <<<"$tokens")" --print-ids --temp 0 \
        -n $((n_tok + n_gen - 1)) --threads 1 2>/dev/null | tr ',' ' ' | xargs | cut -d' ' -f$((n_tok + 1))-)
    if [ "$got" = "$want" ] && [ "$gkq_ids" = "$want" ]; then
        echo "ok   $name: llama.cpp, gkq and the fixture continue with the same $n_gen ids"
    else
        echo "FAIL $name: fixture   $want"
        echo "     llama.cpp: $got"
        echo "     gkq:       $gkq_ids"
        fails=$((fails + 1))
    fi
}
if [ -n "${GKQ_FORWARD_FIXTURES:-}" ] && [ -x "$GKQ_FORWARD_FIXTURES" ]; then
    mkdir -p "$work/forward"
    "$GKQ_FORWARD_FIXTURES" --write-models "$work/forward" >/dev/null
    for gguf in "$work"/forward/*.gguf; do
        name=$(basename "$gguf" .gguf)
        fixture=$src/tests/data/forward/$name.logits
        if [ ! -f "$fixture" ]; then
            echo "FAIL forward-$name: no fixture $fixture"
            fails=$((fails + 1))
            continue
        fi
        forward_check "forward-$name" "$gguf" "$fixture"
        if "$gkq" export "$work/forward/$name-hf" -o "$work/forward/$name-hf.gguf" >"$work/$name.export" 2>&1; then
            forward_check "forward-$name-hf-export" "$work/forward/$name-hf.gguf" "$fixture"
        else
            echo "FAIL forward-$name-hf-export: gkq export: $(tail -3 "$work/$name.export")"
            fails=$((fails + 1))
        fi
    done
    # A Hugging Face folder's tokenizer.json (byte-level BPE; byte-fallback BPE, sentencepiece-style, without a "▁"
    # piece) goes into gkq's GGUF export of the folder and into the knot quantize makes from it (then exported with
    # its records decoded to f32: q8_0 products of random weights break near-ties differently in llama.cpp): llama.cpp
    # must tokenize texts as gkq does on the same GGUF, and continue the text's ids greedily as gkq generate does.
    for family in bpe spm; do
        hf=$work/hf-$family
        cp -r "$work/forward/llama-hf" "$hf"
        rm -f "$hf/tokenizer.bin"
        "$node" "$deps/hf_tokenizer.mjs" "$hf" "$family"
        if ! "$gkq" export "$hf" -o "$work/hf-$family.gguf" >"$work/hf-$family.export" 2>&1 ||
            ! "$gkq" quantize "$hf" --preset q8_0 --threads 2 -o "$work/hf-$family.knot" >"$work/hf-$family.q" 2>&1 ||
            ! "$gkq" export "$work/hf-$family.knot" -o "$work/hf-$family-knot.gguf" --type f32 \
                >>"$work/hf-$family.export" 2>&1; then
            echo "FAIL hf-$family: gkq quantize/export: $(tail -3 "$work/hf-$family.export" "$work/hf-$family.q")"
            fails=$((fails + 1))
            continue
        fi
        for gguf in "$work/hf-$family.gguf" "$work/hf-$family-knot.gguf"; do
            name=$(basename "$gguf" .gguf)
            bad=0
            for text in "The best way to" "Hello, world! 123" "  two  spaces, (parens) and digits 4096"; do
                want=$("$gkq" tokenize "$gguf" --text "$text" --no-bos --json |
                    "$node" -e 'console.log(JSON.parse(require("fs").readFileSync(0, "utf8")).ids.join(" "))')
                got=$("$node" "$deps/tokenize.mjs" "$gguf" "$text" 2>&1) || true
                if [ "$want" != "$got" ]; then
                    echo "FAIL $name: tokens of '$text': gkq $want, llama.cpp $got"
                    bad=1
                fi
            done
            # (a prompt the llama fixture model does not end at once with BOS / EOS in the bpe vocabulary)
            ids=$("$gkq" tokenize "$gguf" --text "Once upon a time" --json |
                "$node" -e 'console.log(JSON.parse(require("fs").readFileSync(0, "utf8")).ids.join(" "))')
            n_tok=$(wc -w <<<"$ids")
            if ! "$node" "$deps/greedy.mjs" --f32-kv "$gguf" 16 $ids >"$work/$name.llama" 2>"$work/$name.err"; then
                echo "FAIL $name: llama.cpp did not run $gguf: $(tail -3 "$work/$name.err")"
                fails=$((fails + 1))
                continue
            fi
            got=$(sed -n 1p "$work/$name.llama")
            gkq_ids=$("$gkq" generate "$gguf" --ids "$(tr ' ' , <<<"$ids")" --print-ids --temp 0 \
                -n $((n_tok + 15)) --threads 1 2>/dev/null | tr ',' ' ' | xargs | cut -d' ' -f$((n_tok + 1))-)
            if [ -z "$got" ] || [ "$got" != "$gkq_ids" ]; then
                echo "FAIL $name: greedy ids: llama.cpp $got, gkq $gkq_ids"
                bad=1
            fi
            if [ "$bad" -eq 0 ]; then
                echo "ok   $name: llama.cpp tokenizes as gkq and continues with the same ids: $got"
            else
                fails=$((fails + 1))
            fi
        done
    done
else
    echo "skipped: the forward-pass fixture models (GKQ_FORWARD_FIXTURES is not the test_forward_fixtures binary)"
fi

[ "$fails" -eq 0 ] || { echo "$fails case(s) failed"; exit 1; }
echo "all cases agree"
