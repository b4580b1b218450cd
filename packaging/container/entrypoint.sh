#!/usr/bin/env bash
# Container entrypoint: checks the server's environment variables with a message naming each bad one (exit 64),
# optionally downloads the knot from WEIGHTS_URL, then execs `gkq serve` (PID 1, so SIGTERM drains the server).
#
#   WEIGHTS_PATH          knot or model file/folder, or an http:// URL when USE_CDN_FALLBACK is true (read by gkq)
#   WEIGHTS_URL           http(s):// or file:// URL of a knot, downloaded into GKQ_DATA_DIR (sets WEIGHTS_PATH)
#   WEIGHTS_SHA256        expected SHA-256 of the downloaded knot (optional)
#   MEMORY_RESIDENT_MODE  true|false (default true)          USE_CDN_FALLBACK  true|false (default false)
#   GPU_CACHE_SIZE_MB     0..16777216 (default 1024)         MAX_AGE_SECONDS   seconds >= 0, 0: no limit (3600)
#   IO_BACKEND            auto|io_uring|io_uring_basic|epoll (default auto; without io_uring in the seccomp
#                         profile, auto steps down to epoll)
#   GKQ_HOST (0.0.0.0)  GKQ_PORT (8080; 0: any free port)  GKQ_THREADS (0: all cores)  GKQ_WORKERS (1)
#   GKQ_TOKENIZER (none)  GKQ_MODEL_ID (read by gkq)  GKQ_DATA_DIR (/var/lib/gkq)  GKQ_BIN (gkq on PATH)
# Arguments are appended to `gkq serve` (e.g. --max-queue 32, or --help).
set -euo pipefail

errors=0
bad() {
    echo "gkq-entrypoint: $1" >&2
    errors=$((errors + 1))
}
log() { echo "gkq-entrypoint: $*" >&2; }

is_bool() { [[ "${1,,}" =~ ^(true|false|1|0|yes|no|on|off)$ ]]; }
is_true() { [[ "${1,,}" =~ ^(true|1|yes|on)$ ]]; }
# A whole number from lo to hi (no sign, no leading +, at most 9 digits so the shell's arithmetic cannot overflow).
in_range() { [[ "$1" =~ ^[0-9]{1,9}$ ]] && ((10#$1 >= $2 && 10#$1 <= $3)); }

check_bool() {
    local name="$1" value="${!1-}"
    [[ -z "${!1+set}" ]] && return 0
    is_bool "$value" || bad "$name='$value': not a boolean (true/false, 1/0, yes/no, on/off)"
}
check_int() {
    local name="$1" lo="$2" hi="$3" value="${!1-}"
    [[ -z "${!1+set}" ]] && return 0
    in_range "$value" "$lo" "$hi" || bad "$name='$value': not a whole number from $lo to $hi"
}

check_bool MEMORY_RESIDENT_MODE
check_bool USE_CDN_FALLBACK
check_int GPU_CACHE_SIZE_MB 0 16777216
if [[ -n "${MAX_AGE_SECONDS+set}" ]]; then
    if ! [[ "$MAX_AGE_SECONDS" =~ ^[0-9]{1,10}(\.[0-9]+)?$ ]] ||
        ! awk -v s="$MAX_AGE_SECONDS" 'BEGIN { exit !(s <= 1e9) }'; then
        bad "MAX_AGE_SECONDS='$MAX_AGE_SECONDS': not a number of seconds from 0 (no limit) to 1e9"
    fi
fi
if [[ -n "${IO_BACKEND+set}" ]] && ! [[ "$IO_BACKEND" =~ ^(auto|io_uring|io_uring_basic|epoll)$ ]]; then
    bad "IO_BACKEND='$IO_BACKEND': not one of auto, io_uring, io_uring_basic, epoll"
fi
host="${GKQ_HOST:-0.0.0.0}"
port="${GKQ_PORT:-8080}"
threads="${GKQ_THREADS:-0}"
workers="${GKQ_WORKERS:-1}"
in_range "$port" 0 65535 || bad "GKQ_PORT='$port': not a port from 0 (any free port) to 65535"
in_range "$threads" 0 1024 || bad "GKQ_THREADS='$threads': not a whole number from 0 to 1024"
in_range "$workers" 1 256 || bad "GKQ_WORKERS='$workers': not a whole number from 1 to 256"
[[ -z "$host" || "$host" =~ [[:space:]] ]] && bad "GKQ_HOST='$host': not an address"

cdn=false
if [[ -n "${USE_CDN_FALLBACK:-}" ]] && is_bool "$USE_CDN_FALLBACK" && is_true "$USE_CDN_FALLBACK"; then cdn=true; fi
if [[ -n "${WEIGHTS_URL:-}" ]]; then
    [[ "$WEIGHTS_URL" =~ ^(https?|file)://[^[:space:]]+$ ]] ||
        bad "WEIGHTS_URL='$WEIGHTS_URL': not an http://, https:// or file:// URL"
    [[ -n "${WEIGHTS_PATH:-}" ]] &&
        bad "WEIGHTS_URL and WEIGHTS_PATH are both set: set one (WEIGHTS_URL downloads and sets WEIGHTS_PATH)"
    $cdn &&
        bad "WEIGHTS_URL with USE_CDN_FALLBACK=true: the CDN mode streams WEIGHTS_PATH=http://..., it downloads nothing"
    if [[ -n "${WEIGHTS_SHA256:-}" ]] && ! [[ "$WEIGHTS_SHA256" =~ ^[0-9a-f]{64}$ ]]; then
        bad "WEIGHTS_SHA256='$WEIGHTS_SHA256': not 64 lower-case hex digits"
    fi
elif [[ -n "${WEIGHTS_PATH:-}" ]]; then
    if $cdn; then
        [[ "$WEIGHTS_PATH" =~ ^http://[^[:space:]]+$ ]] ||
            bad "WEIGHTS_PATH='$WEIGHTS_PATH': USE_CDN_FALLBACK=true needs an http:// URL of a knot"
    elif [[ "$WEIGHTS_PATH" =~ ^[a-z]+:// ]]; then
        bad "WEIGHTS_PATH='$WEIGHTS_PATH': a URL needs USE_CDN_FALLBACK=true (stream it) or WEIGHTS_URL (download it)"
    elif [[ ! -r "$WEIGHTS_PATH" ]]; then
        bad "WEIGHTS_PATH='$WEIGHTS_PATH': no such readable file or folder (mount it, or set WEIGHTS_URL)"
    fi
elif $cdn; then
    bad "USE_CDN_FALLBACK=true needs WEIGHTS_PATH=http://.../model.knot"
fi
if [[ -n "${GKQ_TOKENIZER:-}" && ! -r "$GKQ_TOKENIZER" ]]; then
    bad "GKQ_TOKENIZER='$GKQ_TOKENIZER': no such readable file"
fi
gkq="${GKQ_BIN:-gkq}"
command -v "$gkq" >/dev/null || bad "GKQ_BIN='$gkq': not an executable (the gkq binary)"
if ((errors > 0)); then
    log "$errors bad setting(s); not starting"
    exit 64
fi

if [[ -n "${WEIGHTS_URL:-}" ]]; then
    data="${GKQ_DATA_DIR:-/var/lib/gkq}"
    mkdir -p "$data" || { log "GKQ_DATA_DIR='$data': cannot create it"; exit 73; }
    name="${WEIGHTS_URL##*/}"
    name="${name%%\?*}"
    [[ -n "$name" && "$name" != . && "$name" != .. ]] || name=model.knot
    target="$data/$name"
    log "downloading $WEIGHTS_URL to $target"
    # To a temporary name, then renamed: a half-written knot is never served.
    if ! curl --fail --silent --show-error --location --retry 3 --connect-timeout 10 -o "$target.part" \
        "$WEIGHTS_URL"; then
        rm -f "$target.part"
        log "WEIGHTS_URL='$WEIGHTS_URL': download failed"
        exit 69
    fi
    if [[ -n "${WEIGHTS_SHA256:-}" ]]; then
        got="$(sha256sum "$target.part" | cut -d' ' -f1)"
        if [[ "$got" != "$WEIGHTS_SHA256" ]]; then
            rm -f "$target.part"
            log "WEIGHTS_URL='$WEIGHTS_URL': SHA-256 $got, expected WEIGHTS_SHA256=$WEIGHTS_SHA256"
            exit 65
        fi
    fi
    mv -f "$target.part" "$target"
    export WEIGHTS_PATH="$target"
fi

args=(serve --host "$host" --port "$port" --threads "$threads" --workers "$workers")
[[ -n "${GKQ_TOKENIZER:-}" ]] && args+=(--tokenizer "$GKQ_TOKENIZER")
log "exec $gkq ${args[*]} $* (WEIGHTS_PATH=${WEIGHTS_PATH:-none})"
exec "$gkq" "${args[@]}" "$@"
