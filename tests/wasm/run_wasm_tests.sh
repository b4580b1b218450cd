#!/usr/bin/env bash
# CTest driver of the WebAssembly tests: the C++ side writes a knot and the native decoder's output for each record
# into a temporary folder (make_wasm_vectors), then `node --test` runs wasm/test/*.test.mjs against the build's
# modules — the kernels (gkq_kernels.wasm, emcc) and the reconstructor compiled from wasm/ts by tsc — which decode
# the same records and compare. Exits 77 (skipped) with the reason when node, the kernels or the compiled
# TypeScript are missing.
#   run_wasm_tests.sh MAKE_WASM_VECTORS WASM_MODULE WASM_SOURCE_DIR WASM_JS_DIR
set -euo pipefail
generator=$1
module=$2
wasm_dir=$3
js_dir=${4:-}

node=$(command -v node || command -v nodejs || true)
if [ -z "$node" ]; then
    echo "SKIP: no node or nodejs on PATH (Debian package nodejs; packaging/setup-deps.sh installs it)"
    exit 77
fi
if [ -z "$module" ] || [ ! -f "$module" ]; then
    echo "SKIP: the WebAssembly kernels are not built${module:+ ($module is missing)}: CMake found no emcc, or GKQ_WITH_WASM=OFF"
    exit 77
fi
if [ -z "$js_dir" ] || [ ! -f "$js_dir/gkq_reconstructor.mjs" ]; then
    echo "SKIP: the TypeScript reconstructor is not compiled${js_dir:+ ($js_dir/gkq_reconstructor.mjs is missing)}:" \
         "CMake found no tsc (Debian package node-typescript), or the gkq_wasm_js target was not built"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$generator" "$tmp"
GKQ_WASM_MODULE="$module" GKQ_WASM_JS="$js_dir" GKQ_WASM_VECTORS="$tmp" "$node" --test "$wasm_dir"/test/*.test.mjs
