#!/usr/bin/env bash
# Regenerates docs/screenshots/*.png from the workbench itself: gkq-workbench --screenshot opens the bundled demo
# model (or the model given as the second argument), computes each view and saves it (offscreen, no display needed).
# usage: packaging/screenshots.sh [BUILD_DIR] [MODEL]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
model="${2:-}"
bin="$build/app/gkq-workbench"
if [[ ! -x "$bin" ]]; then
    echo "screenshots.sh: $bin not found; build it first (cmake --build $build --target gkq-workbench)" >&2
    exit 1
fi
out="$root/docs/screenshots"
mkdir -p "$out"
# A fresh settings file so a developer's saved layout does not leak into the documentation.
export XDG_CONFIG_HOME="$(mktemp -d)"
trap 'rm -rf "$XDG_CONFIG_HOME"' EXIT
QT_QPA_PLATFORM=offscreen "$bin" --screenshot "$out" ${model:+"$model"}
