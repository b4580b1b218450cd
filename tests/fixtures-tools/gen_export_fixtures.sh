#!/usr/bin/env bash
# Writes tests/data/export/demo-q4_k_m.tensors (see the README there): the tensor types and data sha256 of what
# llama.cpp's llama-quantize Q4_K_M makes from gkq's F32 GGUF of the bundled demo model. Not part of the build or the
# tests: run it by hand with a built gkq and a llama-quantize of the llama.cpp release the project compares with,
#   tests/fixtures-tools/gen_export_fixtures.sh build/app/gkq /path/to/llama-quantize tests/data/export
# Called without arguments it prints this usage and exits 77 (nothing to do without llama.cpp). Needs jq.
set -euo pipefail
if [ $# -ne 3 ]; then
    sed -n 2,7p "$0"
    exit 77
fi
gkq=$1
quantize=$2
out=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/gkq-export-fixtures-XXXXXX)
trap 'rm -rf "$work"' EXIT

"$gkq" export "$root/resources/demo" --type f32 -o "$work/demo-f32.gguf" >/dev/null
"$quantize" "$work/demo-f32.gguf" "$work/demo-q4_k_m.gguf" Q4_K_M >"$work/quantize.log" 2>&1
set +o pipefail  # tail is cut off by head once the tensor's bytes are read
{
    echo "# llama-quantize Q4_K_M of \`gkq export resources/demo --type f32\`: tensor, ggml type, sha256 of its data, in"
    echo "# llama-quantize's file order (it sorts the tensors by name within a block)"
    echo "# ($(grep -m1 -io 'version: .*' "$work/quantize.log" || echo "llama.cpp build unknown"))"
    "$gkq" inspect --json "$work/demo-q4_k_m.gguf" | jq -r '.tensors[] | "\(.name) \(.dtype) \(.offset) \(.bytes)"' |
        while read -r name type offset bytes; do
            sum=$(tail -c +$((offset + 1)) "$work/demo-q4_k_m.gguf" | head -c "$bytes" | sha256sum | cut -d' ' -f1)
            echo "$name ${type^^} $sum"
        done
} >"$out/demo-q4_k_m.tensors"
echo "wrote $out/demo-q4_k_m.tensors"
