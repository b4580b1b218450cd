#!/usr/bin/env bash
# Builds the Debian package with cpack into a scratch folder, checks its control fields and file list, extracts it
# with dpkg-deb -x (no root, nothing installed on the machine) and runs the extracted programs: gkq --version,
# gkq inspect on the installed demo model (opened by default), gkq-workbench --screenshot offscreen.
# usage: test_deb.sh BUILD_DIR          exit 0 pass, 1 fail, 77 skipped (the reason is printed)
set -euo pipefail
build="$(cd "$1" && pwd)"
for tool in cpack dpkg-deb dpkg-shlibdeps; do
    command -v "$tool" >/dev/null || { echo "SKIP: $tool not found (Debian packages cmake, dpkg-dev)"; exit 77; }
done
[[ -x "$build/app/gkq" && -x "$build/app/gkq-workbench" ]] ||
    { echo "FAIL: $build/app/gkq or gkq-workbench not built"; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# ---- build the package ----
cpack --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 || { cat "$tmp/cpack.log"; fail "cpack"; }
mapfile -t debs < <(find "$tmp/pkg" -maxdepth 1 -name '*.deb')
[[ ${#debs[@]} -eq 1 ]] || fail "expected one .deb in $tmp/pkg, found ${#debs[@]}"
deb="${debs[0]}"
echo "package: $(basename "$deb") ($(stat -c %s "$deb") bytes)"

# ---- control fields ----
field() { dpkg-deb -f "$deb" "$1"; }
[[ "$(field Package)" == gkq-workbench ]] || fail "Package is '$(field Package)'"
[[ "$(field Architecture)" == "$(dpkg --print-architecture)" ]] || fail "Architecture is '$(field Architecture)'"
depends="$(field Depends)"
echo "Depends: $depends"
# Each as a whole package name in the comma-separated list (shlibdeps adds version constraints after it).
depends_names="$(tr ',' '\n' <<<"$depends" | awk '{print $1}')"
for pkg in libqt6core6 libqt6gui6 libqt6widgets6 libqt6charts6 zlib1g qt6-qpa-plugins libc6 libstdc++6; do
    grep -qxF "$pkg" <<<"$depends_names" || fail "Depends lacks $pkg"
done
dpkg-deb -I "$deb" >"$tmp/info.txt"
grep -q "Description: spectral compression" "$tmp/info.txt" || fail "dpkg-deb -I: no Description"

# ---- file list ----
dpkg-deb -c "$deb" | awk '{print $6}' >"$tmp/files"
for f in ./usr/bin/gkq ./usr/bin/gkq-workbench ./usr/share/gkq/demo/model.safetensors ./usr/share/gkq/demo/config.json \
         ./usr/share/gkq/demo/tokenizer.bin ./usr/share/gkq/demo/heldout.txt ./usr/share/gkq/demo/MODEL_CARD.md \
         ./usr/share/applications/gkq-workbench.desktop ./usr/share/icons/hicolor/scalable/apps/gkq-workbench.svg \
         ./usr/share/doc/gkq/README.md ./usr/share/doc/gkq/docs/scale.md ./usr/share/doc/gkq/docs/screenshots/overview.png; do
    grep -qxF "$f" "$tmp/files" || fail "package lacks $f"
done
! grep -q 'train_demo_model.py' "$tmp/files" || fail "the training script is packaged"

# ---- extract and run ----
root="$tmp/root"
dpkg-deb -x "$deb" "$root"
if command -v desktop-file-validate >/dev/null; then
    desktop-file-validate "$root/usr/share/applications/gkq-workbench.desktop" || fail "desktop-file-validate"
fi
version="$("$root/usr/bin/gkq" --version)"
expected_version="$(field Version)"
[[ "$version" == *"$expected_version"* ]] || fail "gkq --version printed '$version', package version $expected_version"
echo "gkq --version: $version"

# The installed gkq must name and open the installed demo model, not the source tree it was built from.
demo="$(cd "$root/usr/share/gkq/demo" && pwd -P)"
"$root/usr/bin/gkq" inspect --help >"$tmp/inspect-help.txt" 2>&1 || fail "gkq inspect --help"
grep -qF "the bundled demo model, $demo)" "$tmp/inspect-help.txt" ||
    { cat "$tmp/inspect-help.txt"; fail "gkq inspect --help does not name $demo"; }
"$root/usr/bin/gkq" inspect >"$tmp/inspect.txt" 2>&1 || { cat "$tmp/inspect.txt"; fail "gkq inspect (demo)"; }
grep -q '^total ' "$tmp/inspect.txt" || { cat "$tmp/inspect.txt"; fail "gkq inspect printed no total"; }
"$root/usr/bin/gkq" inspect --json >"$tmp/inspect.json" || fail "gkq inspect --json"
"$root/usr/bin/gkq" inspect --json "$demo" | cmp -s - "$tmp/inspect.json" ||
    fail "gkq inspect with no argument differs from gkq inspect $demo"
grep "^total " "$tmp/inspect.txt"

# The workbench, offscreen: opens the installed demo model and saves each main view.
shots="$tmp/shots"
XDG_CONFIG_HOME="$tmp/config" QT_QPA_PLATFORM=offscreen "$root/usr/bin/gkq-workbench" --screenshot "$shots" \
    >"$tmp/workbench.log" 2>&1 || { cat "$tmp/workbench.log"; fail "gkq-workbench --screenshot"; }
n_png=0
for png in "$shots"/*.png; do
    [[ -f "$png" ]] || continue
    [[ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" == 89504e470d0a1a0a ]] || fail "$png is not a PNG"
    [[ $(stat -c %s "$png") -gt 1000 ]] || fail "$png is under 1000 bytes"
    n_png=$((n_png + 1))
done
[[ $n_png -ge 1 ]] || { cat "$tmp/workbench.log"; fail "gkq-workbench wrote no PNG into $shots"; }
echo "gkq-workbench --screenshot: $n_png PNGs ($(find "$shots" -name '*.png' -printf '%f ' | sort))"
echo "PASS"
