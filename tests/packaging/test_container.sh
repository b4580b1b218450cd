#!/usr/bin/env bash
# The container files, without a Docker engine: the Dockerfile against check_dockerfile.sh (and each rule against a
# Dockerfile that breaks it), the seccomp profile's structure, and packaging/container/entrypoint.sh for real: bad
# settings exit 64 with a message naming the variable, good ones exec (same PID) gkq serve with the right arguments,
# WEIGHTS_URL downloads with a SHA-256 check, and the real gkq answers through it.
# usage: test_container.sh SOURCE_DIR GKQ_BINARY        exit 0 pass, 1 fail
set -euo pipefail
src="$(cd "$1" && pwd)"
gkq="$2"
entry="$src/packaging/container/entrypoint.sh"
check="$src/tests/packaging/check_dockerfile.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
n_pass=0
fail() { echo "FAIL: $*"; exit 1; }
pass() { n_pass=$((n_pass + 1)); }

# ---- Dockerfile rules ----
"$check" "$src/packaging/container/Dockerfile" || fail "the Dockerfile breaks a rule"
pass
# Each mutation must make the check fail with the given message.
mutate() {
    local name="$1" expr="$2" expected="$3"
    sed -E "$expr" "$src/packaging/container/Dockerfile" >"$tmp/Dockerfile.$name"
    cmp -s "$tmp/Dockerfile.$name" "$src/packaging/container/Dockerfile" && fail "mutation $name changed nothing"
    if "$check" "$tmp/Dockerfile.$name" >"$tmp/check.$name" 2>&1; then fail "check_dockerfile passed $name"; fi
    grep -qF "$expected" "$tmp/check.$name" || { cat "$tmp/check.$name"; fail "$name: no '$expected'"; }
    pass
}
mutate latest 's/^ARG RUNTIME_BASE=debian:12\.8-slim/ARG RUNTIME_BASE=debian:latest/' "tag 'latest' is not pinned"
mutate bare-major 's/^ARG BUILD_BASE=debian:12\.8$/ARG BUILD_BASE=debian:12/' "tag '12' is not pinned"
mutate untagged 's/^FROM \$\{RUNTIME_BASE\}/FROM debian/' "FROM debian: not pinned"
# shellcheck disable=SC2016 # the ${...} are the Dockerfile's, literally
mutate no-arg 's/^FROM \$\{GKQ_BINARIES\} AS/FROM ${GKQ_BINARY} AS/' "no ARG GKQ_BINARY with a default"
# shellcheck disable=SC2016
mutate no-stage 's/^ARG GKQ_BINARIES=build/ARG GKQ_BINARIES=built/' 'FROM ${GKQ_BINARIES} (built): not pinned'
mutate root 's/^USER .*/USER root/' "USER root is root"
mutate no-user '/^USER /d' "no USER"
mutate no-health '/^HEALTHCHECK/,/^ *CMD curl/d' "no HEALTHCHECK"
mutate health-path 's#/health"#/ready"#' "does not request /health"
mutate add-url 's#^COPY --from=binaries /out/ /#ADD https://example.invalid/gkq.tar.gz /#' "ADD of a URL"
mutate apt-lists 's#&& rm -rf /var/lib/apt/lists/\*;#;#' "leaves /var/lib/apt/lists"
mutate shell-entry 's#^ENTRYPOINT .*#ENTRYPOINT /usr/local/bin/gkq-entrypoint#' "ENTRYPOINT in shell form"
echo "check_dockerfile: the Dockerfile passes; $((n_pass - 1)) broken copies are each refused with their rule"

# ---- seccomp profile ----
profile="$src/packaging/container/seccomp-io_uring.json"
jq -e '.defaultAction == "SCMP_ACT_ERRNO"' "$profile" >/dev/null || fail "seccomp: default action is not ERRNO"
for sc in io_uring_setup io_uring_enter io_uring_register; do
    jq -e --arg s "$sc" '[.syscalls[] | select(.action == "SCMP_ACT_ALLOW" and (.args == null) and (.includes == null))
                          | .names[]] | index($s) != null' "$profile" >/dev/null || fail "seccomp: $sc not allowed"
done
# Nothing may be both unconditionally allowed and denied, and the dangerous ones must not be allowed at all.
for sc in mount umount2 unshare setns ptrace bpf kexec_load reboot init_module pivot_root keyctl add_key; do
    jq -e --arg s "$sc" '[.syscalls[] | select(.action == "SCMP_ACT_ALLOW") | .names[]] | index($s) == null' \
        "$profile" >/dev/null || fail "seccomp: $sc is allowed"
done
pass
echo "seccomp: io_uring_setup/enter/register allowed; mount, unshare, setns, ptrace, bpf, keyctl... are not"

# ---- entrypoint: bad settings ----
stub="$tmp/gkq-stub"
cat >"$stub" <<'STUB'
#!/usr/bin/env bash
{ echo "pid=$$"; printf 'arg=%s\n' "$@"
  for v in WEIGHTS_PATH MEMORY_RESIDENT_MODE GPU_CACHE_SIZE_MB MAX_AGE_SECONDS USE_CDN_FALLBACK IO_BACKEND; do
      echo "env $v=${!v-<unset>}"; done; } >"$STUB_OUT"
STUB
chmod +x "$stub"
demo="$src/resources/demo"
# run_bad 'expected message' VAR=value...: exit 64, the message on stderr, the stub never run.
run_bad() {
    local expected="$1"
    shift
    rm -f "$tmp/stub.out"
    local rc=0
    env -i PATH="$PATH" GKQ_BIN="$stub" STUB_OUT="$tmp/stub.out" "$@" bash "$entry" >"$tmp/out" 2>"$tmp/err" || rc=$?
    [[ $rc -eq 64 ]] || { cat "$tmp/err"; fail "$* exited $rc, expected 64"; }
    grep -qF "$expected" "$tmp/err" || { cat "$tmp/err"; fail "$*: stderr lacks '$expected'"; }
    [[ ! -e "$tmp/stub.out" ]] || fail "$*: gkq was started"
    pass
}
run_bad "MEMORY_RESIDENT_MODE='maybe': not a boolean (true/false, 1/0, yes/no, on/off)" MEMORY_RESIDENT_MODE=maybe
run_bad "USE_CDN_FALLBACK='': not a boolean" USE_CDN_FALLBACK=
run_bad "GPU_CACHE_SIZE_MB='8GB': not a whole number from 0 to 16777216" GPU_CACHE_SIZE_MB=8GB
run_bad "GPU_CACHE_SIZE_MB='-1': not a whole number from 0 to 16777216" GPU_CACHE_SIZE_MB=-1
run_bad "GPU_CACHE_SIZE_MB='16777217': not a whole number" GPU_CACHE_SIZE_MB=16777217
run_bad "MAX_AGE_SECONDS='-5': not a number of seconds from 0 (no limit) to 1e9" MAX_AGE_SECONDS=-5
run_bad "MAX_AGE_SECONDS='2000000000': not a number of seconds" MAX_AGE_SECONDS=2000000000
run_bad "MAX_AGE_SECONDS='1h': not a number of seconds" MAX_AGE_SECONDS=1h
run_bad "IO_BACKEND='uring': not one of auto, io_uring, io_uring_basic, epoll" IO_BACKEND=uring
run_bad "GKQ_PORT='70000': not a port from 0 (any free port) to 65535" GKQ_PORT=70000
run_bad "GKQ_WORKERS='0': not a whole number from 1 to 256" GKQ_WORKERS=0
run_bad "WEIGHTS_PATH='/nonexistent/model.knot': no such readable file or folder" WEIGHTS_PATH=/nonexistent/model.knot
run_bad "a URL needs USE_CDN_FALLBACK=true (stream it) or WEIGHTS_URL (download it)" WEIGHTS_PATH=http://cdn.local/m.knot
run_bad "USE_CDN_FALLBACK=true needs an http:// URL of a knot" USE_CDN_FALLBACK=true WEIGHTS_PATH="$demo"
run_bad "USE_CDN_FALLBACK=true needs WEIGHTS_PATH=http://.../model.knot" USE_CDN_FALLBACK=yes
run_bad "WEIGHTS_URL='ftp://x/m.knot': not an http://, https:// or file:// URL" WEIGHTS_URL=ftp://x/m.knot
run_bad "WEIGHTS_URL and WEIGHTS_PATH are both set" WEIGHTS_URL=http://x/m.knot WEIGHTS_PATH="$demo"
run_bad "WEIGHTS_SHA256='abc': not 64 lower-case hex digits" WEIGHTS_URL=http://x/m.knot WEIGHTS_SHA256=abc
run_bad "GKQ_TOKENIZER='/nonexistent/tok.bin': no such readable file" GKQ_TOKENIZER=/nonexistent/tok.bin
run_bad "GKQ_BIN='/nonexistent/gkq': not an executable" GKQ_BIN=/nonexistent/gkq
run_bad "gkq-entrypoint: 3 bad setting(s); not starting" MEMORY_RESIDENT_MODE=2 IO_BACKEND=x GKQ_PORT=x
echo "entrypoint: 21 bad settings each refused (exit 64) with the variable named; gkq never started"

# ---- entrypoint: good settings exec gkq serve (same PID) with the right arguments ----
rm -f "$tmp/stub.out"
env -i PATH="$PATH" GKQ_BIN="$stub" STUB_OUT="$tmp/stub.out" WEIGHTS_PATH="$demo" GKQ_TOKENIZER="$demo/tokenizer.bin" \
    MEMORY_RESIDENT_MODE=False GPU_CACHE_SIZE_MB=64 MAX_AGE_SECONDS=0.5 IO_BACKEND=epoll USE_CDN_FALLBACK=off \
    GKQ_PORT=9000 GKQ_THREADS=2 bash "$entry" --max-queue 4 2>"$tmp/err" &
pid=$!
wait "$pid" || { cat "$tmp/err"; fail "good settings: exit $?"; }
cat >"$tmp/expected" <<EXPECTED
pid=$pid
arg=serve
arg=--host
arg=0.0.0.0
arg=--port
arg=9000
arg=--threads
arg=2
arg=--workers
arg=1
arg=--tokenizer
arg=$demo/tokenizer.bin
arg=--max-queue
arg=4
env WEIGHTS_PATH=$demo
env MEMORY_RESIDENT_MODE=False
env GPU_CACHE_SIZE_MB=64
env MAX_AGE_SECONDS=0.5
env USE_CDN_FALLBACK=off
env IO_BACKEND=epoll
EXPECTED
diff "$tmp/expected" "$tmp/stub.out" || fail "good settings: gkq was not exec'd with the expected arguments/env"
pass
# CDN mode: the URL is passed through to gkq, nothing is downloaded.
env -i PATH="$PATH" GKQ_BIN="$stub" STUB_OUT="$tmp/stub.out" USE_CDN_FALLBACK=true WEIGHTS_PATH=http://cdn.local/m.knot \
    bash "$entry" 2>"$tmp/err" || { cat "$tmp/err"; fail "CDN settings"; }
grep -qx "env WEIGHTS_PATH=http://cdn.local/m.knot" "$tmp/stub.out" || fail "CDN: WEIGHTS_PATH not passed through"
pass

# ---- WEIGHTS_URL: download (file:// here; http(s) in a cluster), SHA-256 checked ----
knot="$demo/config.json"
sum="$(sha256sum "$knot" | cut -d' ' -f1)"
env -i PATH="$PATH" GKQ_BIN="$stub" STUB_OUT="$tmp/stub.out" GKQ_DATA_DIR="$tmp/data" WEIGHTS_URL="file://$knot" \
    WEIGHTS_SHA256="$sum" bash "$entry" 2>"$tmp/err" || { cat "$tmp/err"; fail "WEIGHTS_URL download"; }
grep -qx "env WEIGHTS_PATH=$tmp/data/config.json" "$tmp/stub.out" || fail "WEIGHTS_URL: WEIGHTS_PATH not set"
cmp -s "$knot" "$tmp/data/config.json" || fail "WEIGHTS_URL: downloaded file differs"
pass
rc=0
env -i PATH="$PATH" GKQ_BIN="$stub" STUB_OUT="$tmp/stub.out" GKQ_DATA_DIR="$tmp/data2" WEIGHTS_URL="file://$knot" \
    WEIGHTS_SHA256="$(printf '0%.0s' {1..64})" bash "$entry" 2>"$tmp/err" || rc=$?
[[ $rc -eq 65 ]] || fail "WEIGHTS_URL with a wrong SHA-256 exited $rc, expected 65"
grep -qF "SHA-256 $sum, expected WEIGHTS_SHA256=" "$tmp/err" || { cat "$tmp/err"; fail "wrong SHA-256: message"; }
[[ -z "$(ls -A "$tmp/data2")" ]] || fail "wrong SHA-256: a file was left in GKQ_DATA_DIR"
pass
rc=0
env -i PATH="$PATH" GKQ_BIN="$stub" STUB_OUT="$tmp/stub.out" GKQ_DATA_DIR="$tmp/data3" \
    WEIGHTS_URL="file://$tmp/missing.knot" bash "$entry" 2>"$tmp/err" || rc=$?
[[ $rc -eq 69 ]] || fail "WEIGHTS_URL of a missing file exited $rc, expected 69"
grep -qF "WEIGHTS_URL='file://$tmp/missing.knot': download failed" "$tmp/err" || fail "missing download: message"
pass
echo "entrypoint: good settings exec gkq serve (same PID) with the expected arguments and environment;"
echo "            WEIGHTS_URL downloads and checks the SHA-256 (65 on mismatch, 69 on a failed download)"

# ---- the real gkq through the entrypoint ----
env -i PATH="$PATH" GKQ_BIN="$gkq" WEIGHTS_PATH="$demo" bash "$entry" --help >"$tmp/help" 2>&1 ||
    { cat "$tmp/help"; fail "real gkq: serve --help"; }
grep -qF "gkq serve [--weights FILE|URL]" "$tmp/help" || { cat "$tmp/help"; fail "real gkq: no serve usage"; }
pass
echo "entrypoint + real gkq: serve --help ok"
echo "PASS ($n_pass checks)"
