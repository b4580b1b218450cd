#!/usr/bin/env bash
# The container image built and run for real, with podman (packaging/container/build.sh --prebuilt: the local
# debootstrap base, the gkq this build made). Then, each bounded in time:
#   1. gkq serve in the image on a knot of the demo model (made here by gkq quantize), --network host on a free
#      port, the engine's default seccomp profile: /health, /ready, /infer, /metrics answer; the server is PID 1 and
#      runs as the image's non-root user; the image's HEALTHCHECK passes (and fails against a closed port); it reports
#      the epoll fallback; SIGTERM (podman stop) ends it within the grace period with exit 0. Start-up time printed.
#   2. the same under packaging/container/seccomp-io_uring.json: it reports io_uring.
#   3. the pod of packaging/k8s/deployment.yaml as a kubelet would run it (read by k8s_pod.cjs): the init container
#      then the server container, each with the manifest's command, args, environment (its ConfigMaps), user,
#      read-only root, dropped capabilities, no-new-privileges, limits and volumes, in a network namespace of their
#      own; the startup, readiness and liveness probes on their paths and ports, the Prometheus annotations' port and
#      path; the preStop hook then SIGTERM within terminationGracePeriodSeconds, exit 0. Once as shipped (the bundled
#      demo model), once with gkq-knot's WEIGHTS_URL/WEIGHTS_SHA256 set (the init container downloads the knot).
# A mismatch between the manifests and the image (a port, a path, a variable, the user) fails the test.
# Skipped (77) without root, podman, runc, debootstrap, node's yaml module, Debian's mirror (for a first base), or
# when the engine cannot start a container here. Containers and images it made are removed; the cached base stays.
# usage: test_container_engine.sh SOURCE_DIR GKQ_BINARY
set -euo pipefail
src="$(cd "$1" && pwd)"
gkq="$2"
skip() {
    echo "SKIP: $*"
    exit 77
}
fail() {
    echo "FAIL: $*"
    exit 1
}
# debootstrap and runc live in /usr/sbin, which a non-login PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"
[[ "$(id -u)" -eq 0 ]] || skip "needs root (debootstrap and podman's image storage; CI runs as root)"
for tool in podman runc debootstrap curl jq node; do
    command -v "$tool" >/dev/null || skip "$tool not found (packaging/setup-deps.sh installs it)"
done
export NODE_PATH="${NODE_PATH:+$NODE_PATH:}/usr/share/nodejs"
node -e 'require("yaml")' 2>/dev/null || skip "node cannot load the yaml module (Debian package node-yaml)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$src/packaging/container/containers.conf}"

tmp="$(mktemp -d /tmp/gkq-container-test.XXXXXX)"
chmod 0755 "$tmp"
tag="localhost/gkq-ctest-$$:test"
# Untagged images from before the build: the build's own (its stages, layers) are removed at the end.
before="$(podman images -aq --no-trunc --filter dangling=true 2>/dev/null | sort -u || true)"
names=()
cleanup() {
    local n
    for n in "${names[@]}"; do timeout 60 podman rm -f -t 0 "$n" >/dev/null 2>&1 || true; done
    timeout 60 podman rmi -f "$tag" >/dev/null 2>&1 || true
    local made=()
    mapfile -t made < <(comm -13 <(echo "$before") \
        <(podman images -aq --no-trunc --filter dangling=true 2>/dev/null | sort -u))
    ((${#made[@]} == 0)) || timeout 60 podman rmi "${made[@]}" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
# A port nothing listens on now (the kernel picks it); the server binds it a moment later.
free_port() {
    node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => {
        console.log(s.address().port); s.close(); });'
}
running() { [[ "$(podman inspect --format '{{.State.Running}}' "$1" 2>/dev/null)" == true ]]; }
# ctr_log NAME: the container's output (without podman's complaints that there is no systemd for health timers).
ctr_log() { timeout 30 podman logs "$1" 2>&1 | grep -v "systemd connection" || true; }
logs() {
    echo "---- podman logs $1:"
    ctr_log "$1" | tail -30
}

# ---- the image ----
version="$(sed -nE 's/^project\(gkq_workbench VERSION ([0-9.]+).*/\1/p' "$src/CMakeLists.txt")"
started="$(now)"
if ! base="$(timeout 600 "$src/packaging/container/build.sh" --base-only 2>"$tmp/base.log")"; then
    cat "$tmp/base.log"
    mirror="${GKQ_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
    if ! curl -fsS -o /dev/null --max-time 20 "$mirror/dists/bookworm/Release"
    then
        skip "no base image cached and Debian's mirror is unreachable (debootstrap needs it once)"
    fi
    fail "build.sh --base-only failed with Debian's mirror reachable"
fi
echo "base: $base ($(since "$started") s, $(grep -c 'debootstrap bookworm' "$tmp/base.log" || true) debootstrap run(s))"
if ! timeout 120 podman run --rm --network none --no-healthcheck "$base" true >"$tmp/engine.log" 2>&1; then
    cat "$tmp/engine.log"
    skip "podman cannot start a container here (runtime $(grep -E '^runtime' "$CONTAINERS_CONF" || echo default))"
fi
started="$(now)"
timeout 300 "$src/packaging/container/build.sh" --prebuilt "$gkq" --tag "$tag" >"$tmp/build.out" 2>"$tmp/build.log" ||
    { tail -30 "$tmp/build.log"; fail "build.sh --prebuilt $gkq"; }
cat "$tmp/build.out"
echo "image built in $(since "$started") s"
user="$(podman image inspect --format '{{.Config.User}}' "$tag")"
[[ "$user" =~ ^[1-9][0-9]*:[0-9]+$ ]] || fail "the image's USER is '$user', not a numeric non-root uid:gid"
uid="${user%%:*}"
gid="${user##*:}"
health_cmd="$(podman image inspect --format '{{json .Config.Healthcheck}}' "$tag" | jq -r '.Test | .[0] + " " + .[1]')"
[[ "$health_cmd" == "CMD-SHELL "* ]] || fail "the image has no HEALTHCHECK (docker format): '$health_cmd'"
health_cmd="${health_cmd#CMD-SHELL }"

# The knot: the demo model quantized by this build's gkq, its tokenizer stored in it.
mkdir -p "$tmp/knot"
"$gkq" quantize "$src/resources/demo" -o "$tmp/knot/demo.knot" --preset q8_0 \
    --tokenizer "$src/resources/demo/tokenizer.bin" >"$tmp/quantize.log" 2>&1 ||
    { cat "$tmp/quantize.log"; fail "gkq quantize of the demo model"; }
chmod 0755 "$tmp/knot"
chmod 0644 "$tmp/knot/demo.knot"
knot_sum="$(sha256sum "$tmp/knot/demo.knot" | cut -d' ' -f1)"

# wait_up NAME URL SECONDS: polls URL until it answers 200 (the container must keep running); prints the seconds.
wait_up() {
    local name="$1" url="$2" limit="$3" t0
    t0="$(now)"
    while ! curl -fs -o /dev/null --max-time 1 "$url"; do
        running "$name" || { logs "$name"; fail "$name exited before $url answered"; }
        awk -v a="$t0" -v b="$(now)" -v l="$limit" 'BEGIN { exit !(b - a > l) }' &&
            { logs "$name"; fail "$name: $url did not answer 200 within $limit s"; }
        sleep 0.1
    done
}
# stop_ok NAME GRACE: SIGTERM (the image's STOPSIGNAL) through podman stop, SIGKILL after GRACE s; must exit 0 in time.
stop_ok() {
    local name="$1" grace="$2" t0 rc took
    t0="$(now)"
    timeout $((grace + 30)) podman stop -t "$grace" "$name" >/dev/null 2>&1 || fail "$name: podman stop failed"
    took="$(since "$t0")"
    rc="$(podman inspect --format '{{.State.ExitCode}}' "$name")"
    [[ "$rc" == 0 ]] || { logs "$name"; fail "$name exited $rc on SIGTERM (137: killed after the grace period)"; }
    awk -v t="$took" -v g="$grace" 'BEGIN { exit !(t < g) }' || fail "$name: stop took $took s, grace $grace s"
    echo "  SIGTERM: exit 0 after $took s (grace $grace s)"
}
# serve NAME PORT [podman options...]: the image's own entrypoint and HEALTHCHECK, the knot, --network host.
serve() {
    local name="$1" port="$2"
    shift 2
    names+=("$name")
    timeout 120 podman run -d --name "$name" --network host -v "$tmp/knot:/knot:ro" -e WEIGHTS_PATH=/knot/demo.knot \
        -e GKQ_TOKENIZER= -e GKQ_PORT="$port" -e GKQ_MODEL_ID=gkq-ctest -e GKQ_THREADS=1 "$@" "$tag" \
        >/dev/null 2>"$tmp/$name.run" || { cat "$tmp/$name.run"; fail "podman run $name"; }
}

# ---- 1. the engine's default seccomp profile ----
port="$(free_port)"
base_url="http://127.0.0.1:$port"
t0="$(now)"
serve gkq-ctest-$$-default "$port"
ctr="gkq-ctest-$$-default"
wait_up "$ctr" "$base_url/health" 60
t_health="$(since "$t0")"
while [[ "$(curl -s --max-time 2 "$base_url/ready" | jq -r .status 2>/dev/null)" != ready ]]; do
    running "$ctr" || { logs "$ctr"; fail "exited while loading"; }
    awk -v a="$t0" -v b="$(now)" 'BEGIN { exit !(b - a > 60) }' && { logs "$ctr"; fail "/ready not ready in 60 s"; }
    sleep 0.1
done
t_ready="$(since "$t0")"
echo "start-up (podman run -d to the first answer, port $port): /health $t_health s, /ready \"ready\" $t_ready s"
health="$(curl -fsS --max-time 5 "$base_url/health")"
[[ "$(jq -r .status <<<"$health")" == healthy ]] || fail "/health answered '$health'"
ready="$(curl -fsS --max-time 5 "$base_url/ready")"
[[ "$(jq -r '.model + " " + .backend' <<<"$ready")" == "gkq-ctest epoll" ]] ||
    fail "/ready answered '$ready' (expected model gkq-ctest, backend epoll under the default seccomp profile)"
((  $(jq -r .weights_loaded <<<"$ready") > 0 )) || fail "/ready: no weights loaded: $ready"
infer="$(curl -fsS --max-time 30 -X POST "$base_url/infer" -d '{"prompt":"A fortune","max_tokens":4,"temperature":0}')"
[[ "$(jq -r '.completion_tokens' <<<"$infer")" == 4 && -n "$(jq -r '.text' <<<"$infer")" ]] ||
    fail "/infer answered '$infer'"
metrics="$(curl -fsS --max-time 5 "$base_url/metrics")"
grep -qE '^gkq_server_info\{backend="epoll",.*\} 1$' <<<"$metrics" ||
    fail "/metrics: no gkq_server_info{backend=\"epoll\"}: $(grep gkq_server_info <<<"$metrics")"
grep -qE '^gkq_http_requests_total\{route="/infer",code="200"\} 1$' <<<"$metrics" ||
    fail "/metrics: the /infer request is not counted"
grep -q "; using epoll" <<<"$(ctr_log "$ctr")" ||
    { logs "$ctr"; fail "the epoll fallback is not logged"; }
echo "  /health $(jq -c . <<<"$health"); /ready model gkq-ctest, backend epoll; /infer \"$(jq -r .text <<<"$infer")\";"
echo "  /metrics gkq_server_info{backend=\"epoll\"}; the fallback logged"
status="$(timeout 30 podman exec "$ctr" cat /proc/1/status)"
[[ "$(timeout 30 podman exec "$ctr" cat /proc/1/comm)" == gkq ]] ||
    fail "PID 1 is not gkq (the entrypoint must exec it)"
grep -qE "^Uid:\s+$uid\s+$uid\s+$uid\s+$uid$" <<<"$status" ||
    fail "PID 1 does not run as uid $uid: $(grep Uid <<<"$status")"
grep -qE "^Gid:\s+$gid\s+$gid\s+$gid\s+$gid$" <<<"$status" || fail "PID 1 does not run as gid $gid"
grep -qE '^CapEff:\s+0+$' <<<"$status" || fail "PID 1 has effective capabilities: $(grep CapEff <<<"$status")"
[[ "$(timeout 30 podman exec "$ctr" stat -c '%u:%g' /var/lib/gkq)" == "$uid:$gid" ]] ||
    fail "GKQ_DATA_DIR /var/lib/gkq is not owned by $uid:$gid"
echo "  PID 1 is gkq, uid $uid gid $gid (the image's USER), no effective capabilities; /var/lib/gkq is $uid:$gid"
timeout 60 podman healthcheck run "$ctr" >"$tmp/hc.out" 2>&1 || { cat "$tmp/hc.out"; fail "podman healthcheck run"; }
[[ "$(podman inspect --format '{{.State.Health.Status}}' "$ctr")" == healthy ]] || fail "not healthy after the check"
closed="$(free_port)"
if timeout 30 podman exec -e GKQ_PORT="$closed" "$ctr" sh -c "$health_cmd" >/dev/null 2>&1; then
    fail "the HEALTHCHECK command passes against a closed port ($closed): it checks nothing"
fi
echo "  HEALTHCHECK ($health_cmd): healthy; against a closed port it fails"
stop_ok "$ctr" 10

# ---- 2. the project's seccomp profile ----
profile="$src/packaging/container/seccomp-io_uring.json"
if [[ "$(cat /proc/sys/kernel/io_uring_disabled 2>/dev/null || echo 0)" != 0 ]]; then
    echo "NOTE: io_uring is disabled on this host (kernel.io_uring_disabled), the io_uring profile is not checked"
else
    port="$(free_port)"
    ctr="gkq-ctest-$$-uring"
    serve "$ctr" "$port" --security-opt "seccomp=$profile"
    wait_up "$ctr" "http://127.0.0.1:$port/health" 60
    ready="$(curl -fsS --max-time 5 "http://127.0.0.1:$port/ready")"
    [[ "$(jq -r .backend <<<"$ready")" == io_uring ]] || { logs "$ctr"; fail "seccomp-io_uring.json: /ready '$ready'"; }
    grep -qE '^gkq_server_info\{backend="io_uring",' <<<"$(curl -fsS --max-time 5 "http://127.0.0.1:$port/metrics")" ||
        fail "seccomp-io_uring.json: /metrics does not report io_uring"
    curl -fsS --max-time 30 -X POST "http://127.0.0.1:$port/infer" -d '{"prompt":"A","max_tokens":2}' >/dev/null ||
        fail "seccomp-io_uring.json: /infer"
    echo "seccomp-io_uring.json: backend $(jq -r .backend <<<"$ready") in /ready and gkq_server_info, /infer ok"
    stop_ok "$ctr" 10
fi

# ---- 3. the Kubernetes pod ----
# read_pod K8S_DIR OUT.json: the pod of K8S_DIR/deployment.yaml (with configmap.yaml), and what the test checks
# without running it: the image name build.sh gives, one bash -c script per container, the user.
read_pod() {
    local dir="$1" out="$2" c image run_as
    node "$src/tests/packaging/k8s_pod.cjs" "$dir/deployment.yaml" "$dir/configmap.yaml" >"$out" ||
        fail "k8s_pod.cjs could not read the manifests in $dir"
    [[ "$(jq '.init | length' "$out") $(jq '.main | length' "$out")" == "1 1" ]] ||
        fail "deployment.yaml: expected one init container and one container"
    for c in init main; do
        image="$(jq -r ".${c}[0].image" "$out")"
        [[ "$image" == "gkq:$version" ]] ||
            fail "deployment.yaml: $c container image '$image', build.sh tags gkq:$version"
    done
    [[ "$(jq ".init[0].args, .main[0].args | length" "$out" | sort -u)" == 1 ]] ||
        fail "deployment.yaml: each container's args are expected to be one script (for its bash -c command)"
    jq -e '[.init[0].env, .main[0].env | .[] | test("\n")] | any | not' "$out" >/dev/null ||
        fail "deployment.yaml: an environment value with a newline (not handled here)"
    for c in init main; do
        run_as="$(jq -r ".${c}[0].securityContext.runAsUser // empty" "$out")"
        [[ -z "$run_as" || "$run_as" == "$uid" ]] ||
            fail "deployment.yaml: $c container runAsUser $run_as, the image's USER is $uid (owner of its files)"
        [[ "$(jq -r ".${c}[0].securityContext.runAsNonRoot" "$out")" != true || "${run_as:-$uid}" != 0 ]] ||
            fail "deployment.yaml: runAsNonRoot with uid 0"
    done
}

# pod_args POD.json init|main: the podman options for that container as the kubelet would set it up, one a line.
pod_args() {
    jq -r --arg c "$2" --arg tmp "$tmp" --arg src "$src" '.[$c][0] as $k | $k.securityContext as $s |
        "--network=none", "--no-healthcheck", "--read-only-tmpfs=false",
        (if $s.runAsUser != null then "--user=\($s.runAsUser):\($s.runAsGroup // $s.runAsUser)" else empty end),
        (if $s.fsGroup != null then "--group-add=\($s.fsGroup)" else empty end),
        (if $s.readOnlyRootFilesystem then "--read-only" else empty end),
        (if $s.allowPrivilegeEscalation == false then "--security-opt=no-new-privileges" else empty end),
        (($s.capabilities.drop // [])[] | "--cap-drop=\(.)"), (($s.capabilities.add // [])[] | "--cap-add=\(.)"),
        (if $s.seccompProfile.type == "Localhost" then
            "--security-opt=seccomp=\($src)/packaging/container/\($s.seccompProfile.localhostProfile | split("/") | last)"
         elif $s.seccompProfile.type == "Unconfined" then "--security-opt=seccomp=unconfined" else empty end),
        (if $k.limits.memory then "--memory=\($k.limits.memory | sub("Gi$"; "g") | sub("Mi$"; "m") | sub("Ki$"; "k"))"
         else empty end),
        (if $k.limits.cpu then "--cpus=\($k.limits.cpu | if endswith("m") then (.[:-1] | tonumber / 1000)
                                                             else tonumber end)" else empty end),
        ($k.mounts[] | "--volume=\($tmp)/pod/\(.name):\(.mountPath):\(if .readOnly then "ro" else "rw" end)"),
        ($k.env | to_entries[] | "--env=\(.key)=\(.value)"),
        (if $k.command then "--entrypoint=\($k.command | tojson)" else empty end)' "$1"
}
# probe NAME PORT PATH TIMEOUT: the kubelet's httpGet (2xx/3xx is success), from inside the pod's network namespace.
probe() {
    local code
    code="$(timeout $(($4 + 20)) podman exec "$1" curl -s -o /dev/null -w '%{http_code}' --max-time "$4" \
        "http://127.0.0.1:$2$3" 2>/dev/null || true)"
    [[ "$code" =~ ^[23][0-9][0-9]$ ]]
}
# probe_until POD.json NAME KIND SECONDS: the container's KIND probe, polled until it succeeds.
probe_until() {
    local pj="$1" name="$2" kind="$3" limit="$4" t0 path port timeout_s
    path="$(jq -r ".main[0].probes.$kind.path" "$pj")"
    port="$(jq -r ".main[0].probes.$kind.port" "$pj")"
    timeout_s="$(jq -r ".main[0].probes.$kind.timeoutSeconds" "$pj")"
    [[ "$path" != null ]] || fail "deployment.yaml: no $kind"
    t0="$(now)"
    until probe "$name" "$port" "$path" "$timeout_s"; do
        running "$name" || { logs "$name"; fail "pod: $name exited before its $kind (:$port$path) succeeded"; }
        awk -v a="$t0" -v b="$(now)" -v l="$limit" 'BEGIN { exit !(b - a > l) }' &&
            { logs "$name"; fail "pod: $kind http://:$port$path did not succeed within $limit s"; }
        sleep 0.1
    done
    echo "  $kind :$port$path ok after $(since "$t0") s"
}
# pod POD.json LABEL [WEIGHTS_URL WEIGHTS_SHA256]: the init container, then the server container: probed, checked
# against the manifests, then stopped as the kubelet does. PROBE_LIMIT (seconds) caps the startup probe's wait.
pod() {
    local pj="$1" label="$2" url="${3:-}" sum="${4:-}" name n args=() init_args=() limit seccomp_type expect_backend
    echo "pod ($label):"
    seccomp_type="$(jq -r '.main[0].securityContext.seccompProfile.type // "RuntimeDefault"' "$pj")"
    case "$seccomp_type" in
        RuntimeDefault) expect_backend=epoll ;;
        Localhost | Unconfined) expect_backend=io_uring ;;
        *) fail "deployment.yaml: seccompProfile type '$seccomp_type' is not handled" ;;
    esac
    rm -rf "$tmp/pod"
    for n in $(jq -r '[.init[0].mounts[].name, .main[0].mounts[].name] | unique | .[]' "$pj"); do
        mkdir -p "$tmp/pod/$n"
        chmod 0777 "$tmp/pod/$n" # an emptyDir (or an absent optional ConfigMap: empty)
    done
    mapfile -t init_args < <(pod_args "$pj" init)
    if [[ -n "$url" ]]; then
        # What `kubectl patch configmap gkq-knot` does (docs/deploy.md); file:// stands in for the cluster's https.
        init_args+=(--env="WEIGHTS_URL=$url" --env="WEIGHTS_SHA256=$sum" --volume="$tmp/knot:/knot:ro")
    fi
    name="gkq-ctest-$$-init-$label"
    names+=("$name")
    if ! timeout 120 podman run --name "$name" "${init_args[@]}" "$tag" "$(jq -r '.init[0].args[0]' "$pj")" \
        >"$tmp/init.log" 2>&1; then
        grep -v 'systemd connection' "$tmp/init.log"
        fail "pod: the init container failed"
    fi
    grep -v 'systemd connection' "$tmp/init.log" | sed 's/^/  init: /'
    mapfile -t args < <(pod_args "$pj" main)
    name="gkq-ctest-$$-pod-$label"
    names+=("$name")
    timeout 120 podman run -d --name "$name" "${args[@]}" "$tag" "$(jq -r '.main[0].args[0]' "$pj")" \
        >/dev/null 2>"$tmp/pod.run" || { cat "$tmp/pod.run"; fail "pod: podman run of the server container"; }
    limit="$(jq -r '.main[0].probes.startupProbe | .periodSeconds * .failureThreshold' "$pj")"
    probe_until "$pj" "$name" startupProbe "${PROBE_LIMIT:-$limit}"
    probe_until "$pj" "$name" readinessProbe "${PROBE_LIMIT:-60}"
    probe_until "$pj" "$name" livenessProbe 10
    local port host mport mpath ready infer
    port="$(jq -r '.main[0].probes.readinessProbe.port' "$pj")"
    host="$(jq -r '.main[0].env.GKQ_HOST' "$pj")"
    grep -qF "listening on http://$host:$port " <<<"$(ctr_log "$name")" ||
        { logs "$name"; fail "pod: the server does not listen on $host:$port (the port the probes use)"; }
    ready="$(timeout 30 podman exec "$name" curl -fsS --max-time 5 "http://127.0.0.1:$port/ready")"
    [[ "$(jq -r .model <<<"$ready")" == "$(jq -r .main[0].env.GKQ_MODEL_ID "$pj")" ]] ||
        fail "pod: /ready model is not the ConfigMap's GKQ_MODEL_ID: $ready"
    [[ "$(jq -r .backend <<<"$ready")" == "$expect_backend" ]] ||
        fail "pod: backend $(jq -r .backend <<<"$ready") under seccompProfile $seccomp_type, expected $expect_backend"
    mport="$(jq -r '.annotations["prometheus.io/port"]' "$pj")"
    mpath="$(jq -r '.annotations["prometheus.io/path"]' "$pj")"
    local scraped
    scraped="$(timeout 30 podman exec "$name" curl -fsS --max-time 5 "http://127.0.0.1:$mport$mpath" || true)"
    grep -q "^gkq_server_info{" <<<"$scraped" ||
        fail "pod: prometheus.io/port,path (:$mport$mpath) is not gkq's /metrics"
    infer="$(timeout 60 podman exec "$name" curl -fsS --max-time 30 -X POST "http://127.0.0.1:$port/infer" \
        -d '{"prompt":"A fortune","max_tokens":4,"temperature":0}')" || fail "pod: /infer"
    if [[ -n "$url" ]]; then
        grep -qF "(WEIGHTS_PATH=/models/model.knot)" <<<"$(ctr_log "$name")" ||
            { logs "$name"; fail "pod: the server container does not serve the downloaded knot"; }
    fi
    echo "  listening on $host:$port; /ready $(jq -c '{status, model, backend}' <<<"$ready"); /infer" \
        "\"$(jq -r .text <<<"$infer")\"; metrics at :$mport$mpath"
    # The kubelet: preStop, then SIGTERM, all within terminationGracePeriodSeconds.
    local t_stop pre left grace
    grace="$(jq -r .grace "$pj")"
    t_stop="$(now)"
    mapfile -t pre < <(jq -r '.main[0].preStop // [] | .[]' "$pj")
    if ((${#pre[@]} > 0)); then
        timeout "$grace" podman exec "$name" "${pre[@]}" || fail "pod: the preStop hook (${pre[*]}) failed"
    fi
    left="$(awk -v a="$t_stop" -v b="$(now)" -v g="$grace" 'BEGIN { printf "%d", g - (b - a) }')"
    ((left > 0)) || fail "pod: preStop took the whole grace period"
    echo "  preStop (${pre[*]:-none}) $(since "$t_stop") s, then:"
    stop_ok "$name" "$left"
}
read_pod "$src/packaging/k8s" "$tmp/pod.json"
pod "$tmp/pod.json" shipped
pod "$tmp/pod.json" weights-url "file:///knot/demo.knot" "$knot_sum"

# ---- manifests that do not match the image are refused ----
n_refused=0
# refused NAME FILE SED-EXPRESSION EXPECTED: the pod of a copy of packaging/k8s with FILE edited must fail, saying
# EXPECTED.
refused() {
    local name="$1" file="$2" expr="$3" expected="$4" dir="$tmp/k8s-$1"
    cp -r "$src/packaging/k8s" "$dir"
    sed -E -i "$expr" "$dir/$file"
    cmp -s "$dir/$file" "$src/packaging/k8s/$file" && fail "refused $name: the edit changed nothing"
    names+=("gkq-ctest-$$-init-$name" "gkq-ctest-$$-pod-$name")
    if (read_pod "$dir" "$tmp/pod-$name.json" && PROBE_LIMIT=5 pod "$tmp/pod-$name.json" "$name") \
        >"$tmp/refused-$name.log" 2>&1; then
        cat "$tmp/refused-$name.log"
        fail "refused $name: the pod ran"
    fi
    grep -qF "$expected" "$tmp/refused-$name.log" || { cat "$tmp/refused-$name.log"; fail "$name: no '$expected'"; }
    timeout 60 podman rm -f -t 0 "gkq-ctest-$$-init-$name" "gkq-ctest-$$-pod-$name" >/dev/null 2>&1 || true
    n_refused=$((n_refused + 1))
}
refused container-port deployment.yaml 's/containerPort: 8080/containerPort: 8081/' \
    "startupProbe http://:8081/health did not succeed within 5 s"
refused env-port deployment.yaml 's/value: "8080"/value: "8090"/' \
    "startupProbe http://:8080/health did not succeed within 5 s"
refused readiness-path deployment.yaml 's#path: /ready#path: /readyz#' \
    "readinessProbe http://:8080/readyz did not succeed within 5 s"
refused run-as-user deployment.yaml 's/runAsUser: 10001/runAsUser: 10002/' \
    "runAsUser 10002, the image's USER is 10001"
refused configmap-value configmap.yaml 's/GPU_CACHE_SIZE_MB: "512"/GPU_CACHE_SIZE_MB: "512MB"/' \
    "exited before its startupProbe"
refused entrypoint deployment.yaml 's#exec /usr/local/bin/gkq-entrypoint#exec /usr/bin/gkq-entrypoint#' \
    "exited before its startupProbe"
echo "k8s: $n_refused edited copies of the manifests that do not match the image are each refused"
echo "PASS"
