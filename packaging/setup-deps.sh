#!/usr/bin/env bash
# Installs every Debian 12 package that GKQ Workbench's build, app and tests need.
# Idempotent: a second run installs nothing and takes about a second. Waits on the apt lock.
set -euo pipefail

packages=(
    # toolchain
    build-essential cmake ninja-build pkg-config git
    # repository hygiene tests: repo_clang_format (clang-format) and repo_core_symbols (nm, from binutils)
    clang-format binutils
    # engine
    zlib1g-dev libeigen3-dev nlohmann-json3-dev libpcre2-dev liburing-dev libopenblas-dev liblapacke-dev
    # tokenizer.model tests: spm_train and spm_encode make and encode with real sentencepiece models
    sentencepiece
    # the HTTP server's parser: llhttp's C sources (/usr/share/llhttp), built by cmake/GkqServerDeps.cmake
    node-llhttp
    # workbench (libqt6opengl6-dev is needed by Qt6Charts' CMake config under --no-install-recommends)
    qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev qt6-qpa-plugins libgl-dev
    # running the GUI without a desktop
    xvfb xauth
    # WebAssembly-SIMD kernels (emcc), the TypeScript reconstructor (tsc) and their tests (node --test, npm ci)
    emscripten nodejs node-typescript
    # HTTP benchmarks and the load test: wrk against gkq serve and nginx
    wrk nginx-light
    # packaging tests: the .deb (dpkg-dev for dpkg-shlibdeps, desktop-file-validate), the container entrypoint and
    # the k8s scripts (curl, jq), the monitoring config (promtool and a real Prometheus)
    dpkg-dev desktop-file-utils curl jq prometheus
    # the container image built and run (packaging/container/build.sh, tests/packaging/test_container_engine.sh):
    # podman with runc, as root (host and private networks only: no slirp4netns or uidmap), debootstrap for the
    # base image (no registry), Debian's node yaml module to read the Kubernetes manifests
    podman runc debootstrap node-yaml
)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

# npm installs the pinned JavaScript test clients (npm ci). NodeSource's nodejs ships it; Debian's nodejs does not.
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi

if [ ${#missing[@]} -eq 0 ]; then
    echo "setup-deps: all ${#packages[@]} packages already installed"
    exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
apt_opts=(-o DPkg::Lock::Timeout=600 -y --no-install-recommends)
echo "setup-deps: installing ${missing[*]}"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -qq "${missing[@]}" >/dev/null
echo "setup-deps: done"
