#!/usr/bin/env bash
# Checks a Dockerfile against the rules packaging/container/Dockerfile claims (docs/deploy.md), without a Docker
# engine (hadolint is not packaged for Debian 12, and `docker build --check` needs BuildKit):
#   1. every FROM names a pinned image: a digest, or a tag with a point release (12.8, 12.8-slim) or a date
#      (bookworm-20241111); never untagged, :latest, or a bare major (12, bookworm). ${NAME} in a FROM is the
#      default of an ARG before the first FROM (what a build without --build-arg uses); an earlier stage's name and
#      scratch are not images and need no tag
#   2. the final stage runs as a non-root USER (neither root nor 0), set after its FROM
#   3. the final stage has a HEALTHCHECK that requests /health
#   4. no ADD of a URL (downloads belong in a RUN with a checksum, or in the entrypoint)
#   5. every RUN that installs with apt-get also runs apt-get update, uses --no-install-recommends and removes
#      /var/lib/apt/lists/* in the same layer
#   6. ENTRYPOINT is in exec form (a JSON array), so the server is PID 1 and receives SIGTERM
# usage: check_dockerfile.sh DOCKERFILE        exit 0 when every rule holds, 1 otherwise (each broken rule printed)
set -euo pipefail
file="$1"
[[ -r "$file" ]] || { echo "check_dockerfile: $file: not readable"; exit 1; }

# Instructions one per line: comments dropped, continuation lines joined.
mapfile -t instr < <(sed -e 's/\r$//' "$file" | grep -v '^[[:space:]]*#' |
    awk '{ if (sub(/\\[[:space:]]*$/, "")) { buf = buf $0 " " } else { print buf $0; buf = "" } }' | grep -v '^[[:space:]]*$')

declare -A arg_default=()
declare -A stage=()
problems=0
problem() {
    echo "$file: $1"
    problems=$((problems + 1))
}

last_from=-1
n_from=0
for i in "${!instr[@]}"; do
    line="${instr[$i]}"
    keyword="$(awk '{print toupper($1)}' <<<"$line")"
    case "$keyword" in
        FROM)
            last_from=$i
            n_from=$((n_from + 1))
            image="$(awk '{ for (i = 2; i <= NF; i++) if ($i !~ /^--/) { print $i; exit } }' <<<"$line")"
            written="$image"
            while [[ "$image" =~ \$\{?([A-Za-z_][A-Za-z0-9_]*)\}? ]]; do
                var="${BASH_REMATCH[1]}"
                if [[ -z "${arg_default[$var]+set}" ]]; then
                    problem "FROM $written: no ARG $var with a default before the first FROM"
                    break
                fi
                image="${image/"${BASH_REMATCH[0]}"/${arg_default[$var]}}"
            done
            [[ "$image" == "$written" ]] || written="$written ($image)"
            as="$(awk '{ for (i = 2; i < NF; i++) if (toupper($i) == "AS") { print $(i + 1); exit } }' <<<"$line")"
            if [[ "$image" == *\$* ]]; then
                :
            elif [[ "$image" == scratch || -n "${stage[$image]+set}" ]]; then
                :
            elif [[ "$image" == *@sha256:* ]]; then
                :
            elif [[ "$image" != *:* ]]; then
                problem "FROM $written: not pinned (no tag or digest)"
            else
                tag="${image##*:}"
                if ! [[ "$tag" =~ ^[0-9]+\.[0-9]+ || "$tag" =~ -[0-9]{8}(-|$) ]]; then
                    problem "FROM $written: tag '$tag' is not pinned to a point release, a date or a digest"
                fi
            fi
            [[ -z "$as" ]] || stage[$as]=1
            ;;
        ARG)
            # Only the ARGs before the first FROM apply to FROM lines.
            if ((n_from == 0)) && [[ "$line" =~ ^[Aa][Rr][Gg][[:space:]]+([A-Za-z_][A-Za-z0-9_]*)=(.*)$ ]]; then
                value="${BASH_REMATCH[2]}"
                value="${value%"${value##*[![:space:]]}"}"
                value="${value%\"}"
                arg_default[${BASH_REMATCH[1]}]="${value#\"}"
            fi
            ;;
        ADD)
            if [[ "$line" =~ (https?|ftp):// ]]; then problem "ADD of a URL: $line"; fi
            ;;
        RUN)
            if [[ "$line" =~ apt-get[[:space:]]+(-[^[:space:]]+[[:space:]]+)*install ]]; then
                [[ "$line" == *"apt-get update"* ]] ||
                    problem "RUN installs with apt-get without apt-get update in the same layer"
                [[ "$line" == *--no-install-recommends* ]] ||
                    problem "RUN apt-get install without --no-install-recommends"
                [[ "$line" == *"rm -rf /var/lib/apt/lists/"* ]] ||
                    problem "RUN apt-get install leaves /var/lib/apt/lists in the layer"
            fi
            ;;
    esac
done
((n_from > 0)) || problem "no FROM"

user=""
health=""
entry=""
for ((i = last_from + 1; i < ${#instr[@]}; i++)); do
    line="${instr[$i]}"
    case "$(awk '{print toupper($1)}' <<<"$line")" in
        USER) user="$(awk '{print $2}' <<<"$line")" ;;
        HEALTHCHECK) health="$line" ;;
        ENTRYPOINT) entry="$line" ;;
    esac
done
if [[ -z "$user" ]]; then
    problem "final stage: no USER (it would run as root)"
elif [[ "${user%%:*}" == root || "${user%%:*}" == 0 ]]; then
    problem "final stage: USER $user is root"
fi
if [[ -z "$health" ]]; then
    problem "final stage: no HEALTHCHECK"
elif [[ "$health" != */health* ]]; then
    problem "final stage: HEALTHCHECK does not request /health: $health"
fi
if [[ -n "$entry" ]] && ! [[ "$entry" =~ ^[A-Za-z]+[[:space:]]+\[ ]]; then
    problem "ENTRYPOINT in shell form (the server would not be PID 1): $entry"
fi

if ((problems > 0)); then
    echo "check_dockerfile: $problems problem(s)"
    exit 1
fi
echo "check_dockerfile: $file: $n_from stage(s), final USER $user, HEALTHCHECK on /health: ok"
