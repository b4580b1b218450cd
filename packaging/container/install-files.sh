#!/usr/bin/env bash
# The files the image adds to its base, laid out under OUT as they land in /: gkq (stripped), the bundled demo
# model and the entrypoint. One list for both ways of building the image: the Dockerfile's build stage runs it on
# the gkq it compiled, packaging/container/build.sh --prebuilt on a gkq built outside (the build context).
# usage: install-files.sh GKQ_BINARY OUT
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: install-files.sh GKQ_BINARY OUT" >&2; exit 64; }
gkq="$1"
out="$2"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[[ -x "$gkq" ]] || { echo "install-files: $gkq: not an executable" >&2; exit 66; }
install -D -m 0755 -s "$gkq" "$out/usr/bin/gkq"
install -D -m 0644 -t "$out/usr/share/gkq/demo" "$src/resources/demo/model.safetensors" \
    "$src/resources/demo/config.json" "$src/resources/demo/tokenizer.bin" "$src/resources/demo/MODEL_CARD.md"
install -D -m 0755 "$src/packaging/container/entrypoint.sh" "$out/usr/local/bin/gkq-entrypoint"
