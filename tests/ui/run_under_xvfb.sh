#!/usr/bin/env bash
# Runs the workbench on a real X server (Xvfb via xvfb-run, Qt's xcb platform), as on a desktop rather than Qt's
# offscreen platform that the other ui tests use.
# usage: run_under_xvfb.sh TEST_PROGRAM [ARGS...]            runs a Qt Test program there
#        run_under_xvfb.sh --screenshots GKQ_WORKBENCH        `gkq-workbench --screenshot DIR`: every view is a PNG
# Exit 77 (skipped) with the reason when xvfb-run is missing.
set -uo pipefail
if ! command -v xvfb-run >/dev/null 2>&1; then
    echo "SKIP: xvfb-run is not installed (packaging/setup-deps.sh installs xvfb and xauth)"
    exit 77
fi
export QT_QPA_PLATFORM=xcb
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
export XDG_CONFIG_HOME="$scratch/config"  # a fresh QSettings file
xvfb=(xvfb-run -a -s "-screen 0 1440x900x24")

if [[ "${1:-}" != "--screenshots" ]]; then
    "${xvfb[@]}" "$@"
    exit $?
fi

out="$scratch/shots"
mkdir -p "$out"
if ! "${xvfb[@]}" "$2" --screenshot "$out"; then
    echo "FAIL: $2 --screenshot exited non-zero under xvfb-run"
    exit 1
fi
status=0
for view in overview spectrum quantize quantize-layers compare saturation tuning reconstruct serve; do
    f="$out/$view.png"
    if [[ ! -s "$f" ]] || [[ "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" != "89504e470d0a1a0a" ]]; then
        echo "FAIL: $f is missing or not a PNG"
        status=1
    else
        echo "ok: $view.png ($(stat -c %s "$f") bytes)"
    fi
done
# Out-of-range screenshot options are refused with exit 2 and the value named, before any model is opened.
"${xvfb[@]}" "$2" --screenshot "$out/bad" --screenshot-timeout 0 >"$scratch/bad.txt" 2>&1
rc=$?
if [[ $rc -ne 2 ]] || ! grep -q "screenshot-timeout: '0' is not 1 to 86400 seconds" "$scratch/bad.txt"; then
    echo "FAIL: --screenshot-timeout 0 exited $rc: $(cat "$scratch/bad.txt")"
    status=1
else
    echo "ok: --screenshot-timeout 0 refused"
fi
exit $status
