#!/usr/bin/env bash
# Every tracked C/C++ file is clang-format clean (the root .clang-format): clang-format --dry-run --Werror over
# `git ls-files` of the source tree. Exit 77 (skipped) with the reason when clang-format is missing or the source
# tree is not a git checkout (a release tarball has no list of tracked files).
# usage: check_clang_format.sh SOURCE_DIR
set -uo pipefail
root="$1"
if ! command -v clang-format >/dev/null 2>&1; then
    echo "SKIP: clang-format not found (Debian package clang-format; packaging/setup-deps.sh installs it)"
    exit 77
fi
if ! git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "SKIP: $root is not a git checkout, so there is no list of tracked files to check"
    exit 77
fi
cd "$root" || exit 1
files=()
while IFS= read -r -d '' f; do
    [ -f "$f" ] && files+=("$f")  # a file deleted but not yet committed is not checked
done < <(git ls-files -z -- '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' '*.cu' '*.cuh' '*.inc')
if [ ${#files[@]} -eq 0 ]; then
    echo "no tracked C/C++ files under $root"
    exit 1
fi
report=$(clang-format --dry-run --Werror "${files[@]}" 2>&1)
rc=$?
version=$(clang-format --version)
if [ $rc -ne 0 ]; then
    printf '%s\n' "$report" | grep -E '^[^ ]+:[0-9]+:[0-9]+: error' | head -n 40
    bad=$(printf '%s\n' "$report" | grep -oE '^[^ :]+:[0-9]+:[0-9]+: error' | cut -d: -f1 | sort -u)
    echo "not clang-format clean ($version): $(printf '%s\n' "$bad" | grep -c .) of ${#files[@]} files:"
    printf '  %s\n' $bad
    echo "fix: clang-format -i FILE"
    exit 1
fi
echo "${#files[@]} tracked C/C++ files are clang-format clean ($version)"
