#!/usr/bin/env bash
# Run the unit suite and the CLI (golden) suite of a cross-built tree on its
# target, every binary through a runner command: qemu-user for ARM, node's
# WASI for wasm32-wasi. Used by `make test-arm` and `make test-wasm`.
#
# usage: run_target.sh [options] LABEL BUILD_DIR -- RUNNER [ARG]...
#   --kernels LEVEL       `wisp info` must report this kernel level (checks
#                         the CPU detection picked what the target offers)
#   --unavailable LEVEL   WISP_KERNELS=LEVEL must be refused on this target
#   --unit-tests "A B"    run only these unit tests (default: every one built)
#   --cli-tests "A B"     run only these tests/cli/test_*.sh (default: all)
#   --no-unit NAME=WHY    leave out a unit test that cannot exist on this
#                         target, printing why (repeatable)
# Environment: TOOLS (native test tools), WISP_SHARED.
# Wrappers and logs go to BUILD_DIR/run-LABEL/.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/results.sh"
kernels="" unavailable="" unit_tests="" cli_tests="" skips=()
while [ $# -gt 0 ]; do
    case $1 in
        --kernels) kernels=$2; shift 2 ;;
        --unavailable) unavailable=$2; shift 2 ;;
        --unit-tests) unit_tests=$2; shift 2 ;;
        --cli-tests) cli_tests=$2; shift 2 ;;
        --no-unit) skips+=("$2"); shift 2 ;;
        --) shift; break ;;
        *) break ;;
    esac
done
label=$1 build=$2; shift 2
[ "${1:-}" = -- ] && shift
runner=("$@")
: "${TOOLS:?}" "${WISP_SHARED:?}"
ulimit -c 0 # qemu-user dumps core on a guest SIGILL/SIGSEGV otherwise

# make -j runs targets side by side: label every line
exec > >(sed -u "s/^/[$label] /") 2>&1

out=$build/run-$label
rm -rf "$out"
mkdir -p "$out/bin" "$out/tests" "$out/cli"

# wrap BINARY NAME: an executable script that runs BINARY under the runner
wrap() {
    { printf '#!/bin/sh\nexec'; printf ' %q' "${runner[@]}" "$1"; printf ' "$@"\n'; } >"$out/bin/$2"
    chmod +x "$out/bin/$2"
}

echo "== $label: ${runner[*]}"
wrap "$build/wisp" wisp
wisp=$out/bin/wisp
fail=0
# this script's own checks (the kernel level) are recorded beside the suites'
results_open "target checks on $label"
own_pass=0 own_fail=0 own_skip=0
own_ok()   { own_pass=$((own_pass+1)); echo "$1"; }
own_bad()  { own_fail=$((own_fail+1)); fail=1; echo "FAIL: $1"; results_add fail "$label: $2" "$1"; }

# the kernel level the target really uses
model=$WISP_SHARED/models/stories260K.gguf
if [ -n "$kernels" ]; then
    if [ -f "$model" ]; then
        got=$("$wisp" info -m "$model" | sed -n 's/^ *kernels *//p')
        if [ "$got" = "$kernels" ]; then own_ok "kernels: $got (as expected)"
        else own_bad "wisp info reports kernels '$got', expected '$kernels'" kernel-level; fi
    else
        own_bad "kernel level check: missing $model" kernel-level
    fi
fi
if [ -n "$unavailable" ]; then
    if msg=$(WISP_KERNELS=$unavailable "$wisp" info -m "$model" 2>&1); then
        own_bad "WISP_KERNELS=$unavailable was accepted on $label" unavailable-level
    else
        own_ok "refused as expected: $(echo "$msg" | head -n1)"
    fi
fi

# unit tests: a subset when asked, the rest listed
units=() left=()
for bin in "$build"/tests/test_*; do
    name=$(basename "$bin")
    case $name in *.*) continue ;; esac
    if [ -n "$unit_tests" ] && [[ " $unit_tests " != *" $name "* ]]; then left+=("$name"); continue; fi
    units+=("$out/bin/$name")
    wrap "$bin" "$name"
done
[ ${#left[@]} -eq 0 ] || echo "unit tests not run on $label (the -full target runs them): ${left[*]}"
for s in "${skips[@]+"${skips[@]}"}"; do
    echo "SKIP  ${s%%=*} (platform): ${s#*=}"
    own_skip=$((own_skip+1)); results_add skip "$label: ${s%%=*}" "${s#*=}"
done
results_add suite "target checks on $label" "$own_pass" "$own_fail" "$own_skip"
"$here/run_each.sh" "unit tests on $label" "$out/tests" "${units[@]}" || fail=1

# CLI tests, golden logits included: a subset when asked, the rest listed
selected=() left=()
for t in "$here"/cli/test_*.sh; do
    name=$(basename "$t" .sh)
    if [ -z "$cli_tests" ] || [[ " $cli_tests " == *" $name "* ]]; then selected+=("$t")
    else left+=("$name"); fi
done
[ ${#left[@]} -eq 0 ] || echo "cli tests not run on $label (the -full target runs them): ${left[*]}"
if [ ${#selected[@]} -gt 0 ]; then
    WISP=$wisp WISP_ASAN="" TOOLS=$TOOLS WISP_SHARED=$WISP_SHARED WORK=$out/cli \
        "$here/run_each.sh" "cli tests on $label" "$out/cli" "${selected[@]}" || fail=1
fi
exit $fail
