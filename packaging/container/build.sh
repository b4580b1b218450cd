#!/usr/bin/env bash
# Builds the gkq container image with podman, without a registry: the Debian base image is made here with
# debootstrap from Debian's mirror (once, cached by its package list), then packaging/container/Dockerfile is built
# on it and the image's size is printed.
#
# usage: packaging/container/build.sh [--prebuilt GKQ_BINARY] [--tag NAME] [--base-only]
#   --prebuilt GKQ_BINARY  put this gkq (built on Debian 12, e.g. build/app/gkq) in the image: the build context is a
#                          staged tree (install-files.sh), the Dockerfile's target GKQ_BINARIES=prebuilt, no network
#                          during the build (seconds). Without it the Dockerfile's build stage compiles gkq in the image
#                          (its setup-deps.sh needs Debian's mirror; 20+ minutes on 2 cores).
#   --tag NAME             image name (default gkq:VERSION, VERSION from CMakeLists.txt; podman stores localhost/NAME)
#   --base-only            make (or find) the base image, print its name, build nothing else
# environment:
#   GKQ_CONTAINER_CACHE  where the base's root file system (a tar) and debootstrap's downloaded packages are kept
#                        between runs (default $XDG_CACHE_HOME/gkq-container, else ~/.cache/gkq-container, else
#                        /var/cache/gkq-container: outside the clone, so a fresh clone reuses it)
#   GKQ_DEBIAN_MIRROR    Debian mirror (default http://deb.debian.org/debian; security updates from
#                        GKQ_DEBIAN_SECURITY, default http://deb.debian.org/debian-security)
#   CONTAINERS_CONF      podman's configuration (default packaging/container/containers.conf: runc, no default
#                        ulimits, cgroupfs; what Debian 12's podman needs as root on a host without systemd)
# Needs root (debootstrap, podman's storage), podman, runc, debootstrap (packaging/setup-deps.sh installs them).
# Prints, last: "image NAME: N bytes (X MB), base BASE: M bytes (Y MB)".
set -euo pipefail
# A timeout's SIGTERM runs the EXIT trap (removing a half-made root file system or build context).
trap 'exit 143' TERM INT
# debootstrap, runc and chroot live in /usr/sbin, which a non-login PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$(cd "$here/../.." && pwd)"
dockerfile="$here/Dockerfile"
log() { echo "build.sh: $*" >&2; }
die() {
    log "$*"
    exit 1
}

prebuilt=""
tag=""
base_only=false
while [[ $# -gt 0 ]]; do
    case "$1" in
        --prebuilt)
            [[ $# -ge 2 ]] || die "--prebuilt needs the gkq binary"
            prebuilt="$2"
            shift 2
            ;;
        --tag)
            [[ $# -ge 2 ]] || die "--tag needs a name"
            tag="$2"
            shift 2
            ;;
        --base-only)
            base_only=true
            shift
            ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
            exit 0
            ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
if [[ -z "$tag" ]]; then
    version="$(sed -nE 's/^project\(gkq_workbench VERSION ([0-9.]+).*/\1/p' "$src/CMakeLists.txt")"
    [[ -n "$version" ]] || die "$src/CMakeLists.txt: no 'project(gkq_workbench VERSION x.y.z'"
    tag="gkq:$version"
fi
if [[ -n "$prebuilt" ]]; then
    [[ -x "$prebuilt" ]] || die "--prebuilt $prebuilt: not an executable"
    prebuilt="$(cd "$(dirname "$prebuilt")" && pwd)/$(basename "$prebuilt")"
fi
[[ "$(id -u)" -eq 0 ]] || die "needs root: debootstrap and podman's image storage (CI runs as root)"
for tool in podman runc debootstrap; do
    command -v "$tool" >/dev/null || die "$tool not found (packaging/setup-deps.sh installs it)"
done
export CONTAINERS_CONF="${CONTAINERS_CONF:-$here/containers.conf}"

# ---- the base: Debian bookworm minbase + the runtime packages the Dockerfile installs, security updates applied,
# documentation and locales left out as in Debian's -slim images ----
suite=bookworm
mirror="${GKQ_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security="${GKQ_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}"
packages="$(sed -nE 's/^ARG RUNTIME_PACKAGES="([^"]*)"$/\1/p' "$dockerfile")"
[[ -n "$packages" ]] || die "$dockerfile: no 'ARG RUNTIME_PACKAGES=\"...\"' line"
# Bump the recipe number when the recipe below changes: the key names the cached tar and the image.
recipe="recipe 1; $suite minbase; $mirror; $security; $packages"
key="$(printf '%s' "$recipe" | sha256sum | cut -c1-12)"
base="localhost/gkq-base:$suite-$key"
cache=/var/cache/gkq-container
[[ -z "${HOME:-}" ]] || cache="$HOME/.cache/gkq-container"
[[ -z "${XDG_CACHE_HOME:-}" ]] || cache="$XDG_CACHE_HOME/gkq-container"
cache="${GKQ_CONTAINER_CACHE:-$cache}"
mkdir -p "$cache/debs"
cache="$(cd "$cache" && pwd)"
base_tar="$cache/base-$suite-$key.tar"

make_rootfs() {
    local root="$1"
    log "debootstrap $suite (minbase + ${packages// /,}) from $mirror into $root"
    local started=$SECONDS
    # In a private mount namespace: the /proc and /sys debootstrap mounts in the new root go away with it, even if
    # it is killed.
    if ! unshare --mount --fork debootstrap --variant=minbase --include="${packages// /,}" --cache-dir="$cache/debs" \
        "$suite" "$root" "$mirror" >"$cache/debootstrap.log" 2>&1; then
        tail -20 "$cache/debootstrap.log" >&2
        die "debootstrap failed (log: $cache/debootstrap.log)"
    fi
    # Documentation, manuals and translations are never installed (the -slim images' dpkg filter), nor kept.
    cat >"$root/etc/dpkg/dpkg.cfg.d/gkq-slim" <<'SLIM'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
SLIM
    cat >"$root/etc/apt/sources.list" <<SOURCES
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security $suite-security main
SOURCES
    # Security and stable updates, in a private mount namespace (its /proc goes away with it).
    if ! unshare --mount --fork sh -c "mount -t proc proc '$root/proc' &&
        chroot '$root' sh -c 'apt-get -qq update && DEBIAN_FRONTEND=noninteractive apt-get -qq -y dist-upgrade \
            && apt-get clean'" >"$cache/upgrade.log" 2>&1; then
        tail -20 "$cache/upgrade.log" >&2
        die "apt-get dist-upgrade in the new root failed (log: $cache/upgrade.log)"
    fi
    find "$root/usr/share/doc" -mindepth 1 -not -type d -not -name copyright -delete
    find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
    rm -rf "$root"/usr/share/{groff,info,linda,lintian/overrides,locale,man}/* "$root"/var/lib/apt/lists/* \
        "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/debconf/*-old \
        "$root"/var/log/bootstrap.log "$root"/etc/resolv.conf "$root"/etc/hostname
    find "$root/var/log" -type f -exec truncate -s 0 {} +
    log "base root file system made in $((SECONDS - started)) s"
}

# One build.sh at a time makes the base (CI and a developer may share the cache).
exec 9>"$cache/lock"
flock -w 1800 9 || die "$cache/lock: another build.sh held it for 30 minutes"
if podman image exists "$base"; then
    log "base $base: already in podman's storage"
else
    if [[ ! -s "$base_tar" ]]; then
        # Left by a build.sh that was killed (this one holds the lock, so no other is making one now).
        rm -rf "$cache"/root.*
        root="$cache/root.$$"
        trap 'rm -rf "$root"' EXIT
        make_rootfs "$root"
        tar --numeric-owner -C "$root" -cf "$base_tar.part" .
        mv "$base_tar.part" "$base_tar"
        rm -rf "$root"
        trap - EXIT
        # Only the current recipe's tar is kept.
        find "$cache" -maxdepth 1 -name "base-*.tar" ! -name "$(basename "$base_tar")" -delete
    else
        log "base $base: from the cached $base_tar"
    fi
    podman import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["bash"]' "$base_tar" "$base" >/dev/null
    log "base $base: imported"
fi
flock -u 9
if $base_only; then
    echo "$base"
    exit 0
fi

# ---- the image ----
build_args=(--format docker --pull=never -f "$dockerfile" -t "$tag" --build-arg "RUNTIME_BASE=$base")
started=$SECONDS
if [[ -n "$prebuilt" ]]; then
    ctx="$(mktemp -d /tmp/gkq-container-context.XXXXXX)"
    trap 'rm -rf "$ctx"' EXIT
    "$here/install-files.sh" "$prebuilt" "$ctx/out"
    log "building $tag from $prebuilt (GKQ_BINARIES=prebuilt, no network)"
    podman build "${build_args[@]}" --build-arg GKQ_BINARIES=prebuilt --network=none "$ctx" >&2
else
    log "building $tag, gkq compiled in the image (GKQ_BINARIES=build; Debian's mirror for setup-deps.sh)"
    # GKQ_BINARIES=build said explicitly: podman 4.3 (buildah 1.28) decides which stages to skip from --build-arg values
    # only, not ARG defaults, and would skip the build stage that FROM ${GKQ_BINARIES} then names.
    podman build "${build_args[@]}" --build-arg GKQ_BINARIES=build --build-arg "BUILD_BASE=$base" --network=host \
        "$src" >&2
fi
log "built in $((SECONDS - started)) s"
size="$(podman image inspect --format '{{.Size}}' "$tag")"
base_size="$(podman image inspect --format '{{.Size}}' "$base")"
mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }
echo "image $tag: $size bytes ($(mb "$size")), base $base: $base_size bytes ($(mb "$base_size"))"
