#!/usr/bin/env bash
# Two things have one home each, and this test fails naming file:line where they appear anywhere else in the
# tracked sources of core, kernels, wasm, app and ui:
#   1. block sizes (the 32 elements and 34 / 18 bytes of llama.cpp's Q8_0 / Q4_0 blocks): only in the type table,
#      core/src/formats/dtype.cpp, and its header-only part for kernels, core/include/gkq/block_layout.h. A hit is
#      a 32, 34 or 18 on a line that also speaks of Q8/Q4, blocks or residuals (code or comment).
#   2. the mapping from a StatusCode to a process exit code: only app/cli/exit_code.h. A hit is a line that tests a
#      StatusCode (a case label or a comparison) within three lines of an exit-code constant (kExit*) or of a
#      return of 1, 2 or 130.
# Tests (wasm/test/) and documentation (*.md) are not scanned: tests write the layouts out on purpose, as an
# oracle independent of the table.
set -euo pipefail
root="$1"
cd "$root"
mapfile -t files < <(git ls-files core kernels wasm app ui | grep -E '\.(c|cc|cpp|h|hpp|cu|cuh|inc|mts|ts|mjs|js|cmake)$|CMakeLists\.txt$' |
    grep -v '^wasm/test/')
[ "${#files[@]}" -gt 0 ] || { echo "no tracked sources found under $root"; exit 1; }

bad=0
block_allowed='^(core/src/formats/dtype\.cpp|core/include/gkq/block_layout\.h)$'
for f in "${files[@]}"; do
    [[ "$f" =~ $block_allowed ]] && continue
    # a whole-word 32/34/18 (not part of int32, f32, 0x32, 1.5e-32) on a line about Q8/Q4 blocks or residuals
    # (transformer.h's max_batch counts tokens per block of a batch: not a type's block)
    hits=$(grep -nE '(^|[^A-Za-z0-9_.x])(32|34|18)([^A-Za-z0-9_.]|$)' "$f" |
        grep -iE 'q8|q4|qk|block|blk|residual' | grep -v 'tokens per block' || true)
    if [ -n "$hits" ]; then
        while IFS= read -r h; do echo "block size outside the type table: $f:$h"; done <<<"$hits"
        bad=1
    fi
done

exit_allowed='^app/cli/exit_code\.h$'
for f in "${files[@]}"; do
    [[ "$f" =~ $exit_allowed ]] && continue
    hits=$(awk '
        { line[NR] = $0 }
        /case StatusCode::|[=!]= *StatusCode::|StatusCode::[A-Za-z]+ *[=!]=/ { sc[NR] = 1 }
        /kExit(Ok|Failure|BadInput|Cancelled)|return (1|2|130);/ { ex[NR] = 1 }
        END {
            for (i = 1; i <= NR; i++) if (sc[i]) {
                for (j = i - 3; j <= i + 3; j++) if (ex[j]) { printf "%d:%s\n", i, line[i]; break }
            }
        }' "$f")
    if [ -n "$hits" ]; then
        while IFS= read -r h; do echo "StatusCode mapped to an exit code outside exit_code(): $f:$h"; done <<<"$hits"
        bad=1
    fi
done

[ "$bad" -eq 0 ] || exit 1
echo "block sizes only in the type table; one Status-to-exit-code mapping"
