#!/usr/bin/env bash
# Validates packaging/k8s/*.yaml (and the GPU overlay, merged) against the Kubernetes OpenAPI schemas of the pinned
# kubernetes-models npm package (packaging/k8s/validate/package-lock.json), then checks that broken copies are
# refused with the expected error. The npm packages are installed with `npm ci` into WORK_DIR when missing; without
# node or the registry the test is skipped (77) with the reason.
# Then the shell scripts of the Jobs and the Deployment run here with the real gkq (GKQ_BINARY): the shards are
# quantized and merged, the init container downloads the knot, the server container serves it.
# usage: test_k8s.sh SOURCE_DIR WORK_DIR [GKQ_BINARY]
set -euo pipefail
src="$(cd "$1" && pwd)"
work="$2"
gkq="${3:-}"
k8s="$src/packaging/k8s"
command -v node >/dev/null || { echo "SKIP: node not found (Debian package nodejs)"; exit 77; }
mkdir -p "$work"
cp "$k8s/validate/package.json" "$k8s/validate/package-lock.json" "$k8s/validate/validate.mjs" "$work/"
# npm ci when node_modules is missing or was installed from another lockfile.
if ! cmp -s "$work/package-lock.json" "$work/node_modules/.package-lock.source" 2>/dev/null ||
    [[ ! -d "$work/node_modules/kubernetes-models" ]]; then
    command -v npm >/dev/null || { echo "SKIP: npm not found and $work/node_modules is missing"; exit 77; }
    if ! (cd "$work" && timeout 300 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >"$work/npm.log" 2>&1
    then
        echo "SKIP: npm ci failed (registry unreachable?); see $work/npm.log:"
        tail -5 "$work/npm.log"
        exit 77
    fi
    cp "$work/package-lock.json" "$work/node_modules/.package-lock.source"
fi
validate() { node "$work/validate.mjs" "$@"; }
fail() { echo "FAIL: $*"; exit 1; }

cd "$k8s"
manifests=(configmap.yaml deployment.yaml service.yaml hpa.yaml quantize-pvc.yaml quantize-job.yaml merge-job.yaml
    kustomization.yaml gpu/kustomization.yaml)
for f in *.yaml gpu/*.yaml; do
    [[ " ${manifests[*]} " == *" $f "* || "$f" == gpu/deployment-gpu-patch.yaml ]] || fail "$f is not validated here"
done
validate "${manifests[@]}" || fail "the manifests are not valid"

tmp="$(mktemp -d)"
server=""
trap '[[ -z "$server" ]] || kill -KILL "$server" 2>/dev/null; rm -rf "$tmp"' EXIT
n_bad=0
# broken NAME FILE SED-EXPRESSION EXPECTED: the validator must refuse the edited copy and print EXPECTED.
broken() {
    local name="$1" file="$2" expr="$3" expected="$4"
    mkdir -p "$tmp/$name/gpu"
    cp ./*.yaml "$tmp/$name/"
    cp gpu/*.yaml "$tmp/$name/gpu/"
    sed -E -i "$expr" "$tmp/$name/$file"
    cmp -s "$tmp/$name/$file" "$file" && fail "$name: the edit changed nothing"
    # A patch is validated through the overlay that applies it.
    local target="$file"
    [[ "$file" == gpu/* ]] && target=gpu/kustomization.yaml
    if (cd "$tmp/$name" && validate "$target") >"$tmp/$name.out" 2>&1; then fail "$name: accepted"; fi
    grep -qF "$expected" "$tmp/$name.out" || { cat "$tmp/$name.out"; fail "$name: no '$expected'"; }
    n_bad=$((n_bad + 1))
}
broken typo-field deployment.yaml 's/readinessProbe:/readinesProbe:/' 'unknown field "readinesProbe"'
broken port-type deployment.yaml 's/containerPort: 8080/containerPort: "8080"/' 'containerPort must be integer'
broken no-name quantize-job.yaml 's/^        - name: quantize/        - stdin: false/' \
    'containers/0 must have required property name'
broken completion-mode quantize-job.yaml 's/completionMode: Indexed/completionMode: Sharded/' \
    'completionMode must be equal to one of the allowed values'
broken hpa-target hpa.yaml 's/averageUtilization: 70/averageUtilization: high/' 'averageUtilization must be integer'
broken service-port service.yaml 's/port: 80$/port: eighty/' 'port must be integer'
broken kind deployment.yaml 's/^kind: Deployment/kind: Deploymnet/' 'unknown apiVersion/kind apps/v1 Deploymnet'
broken gpu-patch gpu/deployment-gpu-patch.yaml 's/^      nodeSelector:/      nodeSelecter:/' \
    'unknown field "nodeSelecter"'
broken gpu-patch-target gpu/deployment-gpu-patch.yaml 's/^  name: gkq$/  name: gkq-other/' 'matches no resource'
broken yaml configmap.yaml 's/^  GKQ_THREADS: "2"/  GKQ_THREADS: "2/' 'YAML:'
echo "k8s: ${#manifests[@]} files valid; $n_bad broken copies each refused with the expected error"

# ---- the containers' shell scripts, run here with the real gkq (paths in the pod mapped to scratch folders) ----
[[ -n "$gkq" && -x "$gkq" ]] || { echo "PASS (the pods' scripts were not run: no gkq binary given)"; exit 0; }
# script FILE init|main: the first argument (the bash -c script) of that container of the manifest.
script() {
    (cd "$work" && node --input-type=module -e '
        import fs from "node:fs"; import { parse } from "yaml";
        const spec = parse(fs.readFileSync(process.argv[1], "utf8")).spec.template.spec;
        const c = process.argv[2] === "init" ? spec.initContainers[0] : spec.containers[0];
        process.stdout.write(c.args[0]);' "$k8s/$1" "$2")
}
pod="$tmp/pod"
mkdir -p "$pod/bin" "$pod/work" "$pod/models"
ln -s "$gkq" "$pod/bin/gkq"
map() { sed -e "s|/work/|$pod/work/|g" -e "s|/models/|$pod/models/|g" -e "s|/etc/gkq/rknot|$pod/rknot|g" \
    -e "s|/usr/local/bin/gkq-entrypoint|$src/packaging/container/entrypoint.sh|g"; }
demo="$src/resources/demo"
n_shards="$(grep -oE '^  completions: [0-9]+' quantize-job.yaml | grep -oE '[0-9]+$')"
script quantize-job.yaml main | map >"$pod/quantize.sh"
for ((i = 0; i < n_shards; i++)); do
    env -i PATH="$pod/bin:$PATH" JOB_COMPLETION_INDEX=$i GKQ_SHARDS="$n_shards" MODEL="$demo" \
        TOKENIZER="$demo/tokenizer.bin" PRESET=lowrank-q4 THREADS=1 bash "$pod/quantize.sh" >"$pod/q$i.log" 2>&1 ||
        { cat "$pod/q$i.log"; fail "quantize-job.yaml: shard $i/$n_shards"; }
done
script merge-job.yaml main | map >"$pod/merge.sh"
env -i PATH="$pod/bin:$PATH" GKQ_SHARDS="$n_shards" bash "$pod/merge.sh" >"$pod/merge.log" 2>&1 ||
    { cat "$pod/merge.log"; fail "merge-job.yaml"; }
grep -q "^result   ok" "$pod/merge.log" || { cat "$pod/merge.log"; fail "merge-job.yaml: gkq verify"; }
echo "quantize-job.yaml ($n_shards shards) + merge-job.yaml: $(grep -oE '^wrote .*' "$pod/merge.log")"
# The Deployment's init container downloads the merged knot (file:// here), the server container serves it.
script deployment.yaml init | map >"$pod/init.sh"
sum="$(sha256sum "$pod/work/model.knot" | cut -d' ' -f1)"
env -i PATH="$PATH" WEIGHTS_URL="file://$pod/work/model.knot" WEIGHTS_SHA256="$sum" bash "$pod/init.sh" \
    >"$pod/init.log" 2>&1 || { cat "$pod/init.log"; fail "deployment.yaml: init container"; }
cmp -s "$pod/work/model.knot" "$pod/models/model.knot" || fail "deployment.yaml: init container did not download"
script deployment.yaml main | map >"$pod/main.sh"
env -i PATH="$pod/bin:$PATH" GKQ_HOST=127.0.0.1 GKQ_PORT=0 GKQ_THREADS=1 WEIGHTS_PATH="$demo" \
    GKQ_TOKENIZER="$demo/tokenizer.bin" GKQ_MODEL_ID=gkq-k8s bash "$pod/main.sh" 2>"$pod/serve.log" &
server=$!
for _ in $(seq 300); do
    grep -qE "weights loaded|loading failed" "$pod/serve.log" && break
    kill -0 "$server" 2>/dev/null || break
    read -rt 0.1 <> <(:) || true
done
port="$(grep -oE 'listening on http://127\.0\.0\.1:[0-9]+' "$pod/serve.log" | grep -oE '[0-9]+$' || true)"
ready="$(curl -s "http://127.0.0.1:${port:-1}/ready" || true)"
kill -TERM "$server" 2>/dev/null || true
rc=0
wait "$server" || rc=$?
server=""
grep -qF "WEIGHTS_PATH=$pod/models/model.knot" "$pod/serve.log" || { cat "$pod/serve.log"; fail "main: not the knot"; }
[[ "$(jq -r '.status + " " + .model' <<<"$ready")" == "ready gkq-k8s" ]] ||
    { cat "$pod/serve.log"; fail "deployment.yaml: /ready answered '$ready'"; }
[[ $rc -eq 0 ]] || fail "deployment.yaml: the server exited $rc on SIGTERM"
echo "deployment.yaml: init container downloaded the merged knot (SHA-256 checked), the server container served it"
echo "  (/ready: $(jq -c "{status, model, backend, weights_loaded}" <<<"$ready")) and drained on SIGTERM"
echo "PASS"
