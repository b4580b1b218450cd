#!/usr/bin/env bash
# device-check.sh: on a machine with a CUDA device, builds only what the GPU checks need, runs the CUDA parity test
# (tests/kernels/test_kernels_cuda: every CUDA kernel against the scalar oracles) and the GPU benchmark (the
# reconstruct kernel against the device's own memset and copy), then prints one summary. Meant to finish in well
# under 5 minutes (a Release build of gkq_core, gkq_kernels and two programs; the benchmark's GPU section only).
#   kernels/cuda/device-check.sh [BUILD_DIR]      default: build-device at the repository root
# Needs the Debian packages of packaging/setup-deps.sh (Qt Test, OpenBLAS, LAPACKE, Eigen, zlib, nlohmann-json) and
# nvcc; the server and the WebAssembly kernels are left out of this build.
# Exit status: 0 when the build and the parity test pass, 77 when there is no usable device, 1 otherwise.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build-device}
jobs=$(nproc 2>/dev/null || echo 4)
mkdir -p "$build"
log="$build/device-check.log"
: > "$log"
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }

summary=()
status=0
note() { summary+=("$1"); }

missing=()
for tool in cmake ninja; do command -v "$tool" > /dev/null || missing+=("$tool"); done
nvcc=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true)
[ -n "$nvcc" ] || missing+=("nvcc")
if [ ${#missing[@]} -gt 0 ]; then
    echo "device-check: missing ${missing[*]} (packaging/setup-deps.sh installs the Debian packages; nvcc comes with CUDA)"
    exit 1
fi

device=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2> /dev/null | head -1)
note "device      ${device:-nvidia-smi found no device}"

echo "device-check: configuring and building in $build (log: $log)"
if cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGKQ_BUILD_APP=OFF -DGKQ_WITH_CUDA=ON \
        -DGKQ_WITH_SERVER=OFF -DGKQ_WITH_WASM=OFF -DCMAKE_CUDA_COMPILER="$nvcc" >> "$log" 2>&1 &&
    ninja -C "$build" -j"$jobs" test_kernels_cuda bench_reconstruct >> "$log" 2>&1; then
    note "build       ok ($(elapsed) s)"
else
    note "build       FAILED after $(elapsed) s: last lines of $log:"
    while IFS= read -r line; do note "            $line"; done < <(tail -15 "$log")
    printf '\n=== device-check summary ===\n'
    printf '%s\n' "${summary[@]}"
    exit 1
fi

echo "device-check: parity test"
test_out=$("$build/tests/test_kernels_cuda" 2>&1)
test_rc=$?
echo "$test_out" >> "$log"
case $test_rc in
    0) note "parity      PASS: $(grep -m1 '^Totals' <<< "$test_out")" ;;
    77) note "parity      SKIPPED: $(grep -m1 '^SKIP' <<< "$test_out")"; status=77 ;;
    *)
        note "parity      FAIL (exit $test_rc): $(grep -m1 '^Totals' <<< "$test_out")"
        while IFS= read -r line; do note "            $line"; done < <(grep -E '^FAIL|Loc:' <<< "$test_out" | head -20)
        status=1
        ;;
esac
while IFS= read -r line; do note "            $line"; done < <(grep -E 'QINFO' <<< "$test_out" | sed 's/^QINFO *: *//')

if [ $test_rc -ne 77 ]; then
    echo "device-check: GPU benchmark"
    bench_out=$(timeout 180 "$build/tests/bench/bench_reconstruct" --gpu-only --runs 10 2>> "$log")
    bench_rc=$?
    echo "$bench_out" >> "$log"
    if [ $bench_rc -eq 0 ]; then
        note "benchmark   ok"
        while IFS= read -r line; do note "  $line"; done < <(sed -n '/^## GPU/,$p' <<< "$bench_out")
    else
        note "benchmark   FAILED (exit $bench_rc; see $log)"
        status=1
    fi
fi

note "total       $(elapsed) s"
printf '\n=== device-check summary ===\n'
printf '%s\n' "${summary[@]}"
exit $status
