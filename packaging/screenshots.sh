#!/usr/bin/env bash
# Regenerates the README's screenshots from the workbench itself: gkq-workbench --screenshot opens the bundled demo
# model (or MODEL), computes each view and saves it (offscreen, no display needed).
# usage: packaging/screenshots.sh [BUILD_DIR] [MODEL] [OUT_DIR] [PRESET] [TIMEOUT_S]
#   OUT_DIR    default docs/screenshots
#   PRESET     the preset the Quantize / Tuning / Reconstruct / Serve views show (default lowrank-q4)
#   TIMEOUT_S  give up after this many seconds (default 600)
# The TinyLlama-shaped tour (docs/screenshots/tinyllama):
#   build/app/gkq synth --like tinyllama-1.1b -o /tmp/tinyllama && \
#   packaging/screenshots.sh build /tmp/tinyllama docs/screenshots/tinyllama q4_k_m 3600
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
model="${2:-}"
out="${3:-$root/docs/screenshots}"
preset="${4:-lowrank-q4}"
timeout_s="${5:-600}"
bin="$build/app/gkq-workbench"
if [[ ! -x "$bin" ]]; then
    echo "screenshots.sh: $bin not found; build it first (cmake --build $build --target gkq-workbench)" >&2
    exit 1
fi
mkdir -p "$out"
# A fresh settings file so a developer's saved layout does not leak into the documentation.
export XDG_CONFIG_HOME="$(mktemp -d)"
trap 'rm -rf "$XDG_CONFIG_HOME"' EXIT
QT_QPA_PLATFORM=offscreen "$bin" --screenshot "$out" --screenshot-preset "$preset" --screenshot-timeout "$timeout_s" \
    ${model:+"$model"}
