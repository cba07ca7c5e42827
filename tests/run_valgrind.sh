#!/usr/bin/env bash
# run_valgrind.sh BUILD SHARED "CLI_TESTS" UNIT_BINARY...: the unit tests and
# the named CLI tests once under valgrind memcheck ($VALGRIND is the command,
# e.g. "valgrind -q --error-exitcode=97"): invalid reads and writes, use of
# uninitialised values, definite leaks. Each binary (and the wisp command the
# CLI tests call) runs through a wrapper script; logs in BUILD/valgrind/.
set -u
build=$1 shared=$2 cli=$3; shift 3
: "${VALGRIND:?set VALGRIND to the valgrind command line}"
here=$(cd "$(dirname "$0")" && pwd)
out=$build/valgrind
rm -rf "$out"
mkdir -p "$out/bin"
# wrap BINARY WRAPPER: a script that runs BINARY under valgrind
wrap() { { printf '#!/bin/sh\nexec %s' "$VALGRIND"; printf ' %q' "$1"; printf ' "$@"\n'; } > "$2"; chmod +x "$2"; }
units=()
for t in "$@"; do
    wrap "$t" "$out/bin/$(basename "$t")"
    units+=("$out/bin/$(basename "$t")")
done
status=0
"$here/run_each.sh" "unit tests under valgrind" "$out/unit" "${units[@]}" || status=1
wrap "$build/wisp" "$out/bin/wisp"
clis=()
for n in $cli; do clis+=("$here/cli/$n.sh"); done
WISP=$out/bin/wisp WISP_ASAN="" TOOLS=$build/tests/tools WISP_SHARED=$shared WORK=$out/cli \
    "$here/run_each.sh" "cli tests under valgrind" "$out/cli" "${clis[@]}" || status=1
exit $status
