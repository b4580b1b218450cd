#!/usr/bin/env bash
# CTest driver of the edge worker test (packaging/edge): installs the pinned npm packages (wrangler, miniflare with
# its workerd, @cloudflare/workers-types) into DEPS_DIR with `npm ci` when they are missing or stale, type-checks the
# worker with Debian's tsc, bundles it with `wrangler deploy --dry-run` exactly as a deploy would, has the C++ side
# write a knot and the native outputs (make_wasm_vectors), and runs tests/edge/edge_worker.test.mjs under node --test,
# which serves the bundle from Miniflare's local workerd with in-memory KV.
# Exits 77 (skipped) with the reason when node or the built kernels are missing, or when the packages are not
# installed and the npm registry cannot be reached.
#   run_edge_tests.sh MAKE_WASM_VECTORS WASM_MODULE SOURCE_DIR DEPS_DIR [--install-only]
set -euo pipefail
generator=$1
module=$2
src=$3
deps=$4
mode=${5:-}
edge=$src/packaging/edge

node=$(command -v node || command -v nodejs || true)
if [ -z "$node" ]; then
    echo "SKIP: no node or nodejs on PATH (Debian package nodejs; packaging/setup-deps.sh installs it)"
    exit 77
fi

# ---- the pinned packages: npm ci into DEPS_DIR when missing or installed from another package-lock.json ----
mkdir -p "$deps"
stamp=$deps/node_modules/.gkq-package-lock.json
if ! cmp -s "$edge/package-lock.json" "$stamp" || [ ! -x "$deps/node_modules/.bin/wrangler" ]; then
    if ! command -v npm >/dev/null; then
        echo "SKIP: the edge worker's npm packages are not installed in $deps and there is no npm (Debian package npm)"
        exit 77
    fi
    if ! timeout 20 npm ping >/dev/null 2>&1; then
        echo "SKIP: the edge worker's npm packages are not installed in $deps and the npm registry is unreachable" \
             "(npm ping failed); run \`ninja edge_worker_deps\` where it is reachable"
        exit 77
    fi
    cp "$edge/package.json" "$edge/package-lock.json" "$deps/"
    (cd "$deps" && npm ci --ignore-scripts --no-audit --no-fund)
    cp "$edge/package-lock.json" "$stamp"
fi
[ "$mode" = "--install-only" ] && exit 0

if [ -z "$module" ] || [ ! -f "$module" ]; then
    echo "SKIP: the WebAssembly kernels are not built${module:+ ($module is missing)}: CMake found no emcc, or GKQ_WITH_WASM=OFF"
    exit 77
fi

# ---- a staging copy of packaging/edge beside a link to wasm/, so that the worker's relative import resolves ----
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stage=$tmp/packaging/edge
mkdir -p "$stage"
cp -r "$edge/src" "$edge/tools" "$edge/wrangler.toml" "$edge/tsconfig.json" "$edge/package.json" "$stage/"
cp "$module" "$stage/src/gkq_kernels.wasm"
ln -s "$src/wasm" "$tmp/wasm"
ln -s "$deps/node_modules" "$stage/node_modules"

if command -v tsc >/dev/null; then
    echo "tsc $(tsc --version): type check of the worker"
    (cd "$stage" && tsc -p tsconfig.json)
else
    echo "note: no tsc (Debian package node-typescript): the type check is skipped, the bundle is still built"
fi

# wrangler: no metrics, its config and logs inside the temporary folder
(cd "$stage" && WRANGLER_SEND_METRICS=false XDG_CONFIG_HOME=$tmp/config WRANGLER_LOG_PATH=$tmp/logs \
    node_modules/.bin/wrangler deploy --dry-run --outdir "$tmp/bundle")
rm -f "$tmp/bundle/README.md" "$tmp/bundle/"*.map

"$generator" "$tmp/vectors"
GKQ_EDGE_BUNDLE=$tmp/bundle GKQ_EDGE_DEPS=$deps GKQ_EDGE_TOOLS=$stage/tools GKQ_WASM_VECTORS=$tmp/vectors \
    "$node" --test "$src/tests/edge/edge_worker.test.mjs"
