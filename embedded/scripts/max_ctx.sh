#!/usr/bin/env bash
# make embedded-max-ctx: the longest context whose inference firmware still
# links into the SRAM budget, per board, found by bisection over real links
# (the linker script is the judge, not an estimate).
# Environment: EMB, EMB_CTX (known to fit), MAKE_CMD.
set -u
: "${EMB:?}" "${EMB_CTX:?}" "${MAKE_CMD:?}"
mkdir -p "$EMB"
status=0
links() { $MAKE_CMD EMB_CTX="$2" "$EMB/$1/infer-ctx$2.elf" >"$EMB/max-ctx-$1.log" 2>&1; }
for b in m4 m7 rv64; do
    lo=$EMB_CTX hi=$((EMB_CTX * 4))
    links "$b" "$lo" || { echo "$b: even ctx $lo does not link (see $EMB/max-ctx-$b.log)"; status=1; continue; }
    while [ $((hi - lo)) -gt 1 ]; do
        mid=$(((lo + hi) / 2))
        if links "$b" "$mid"; then lo=$mid; else hi=$mid; fi
    done
    rm -f "$EMB/$b"/infer-ctx*.elf.map
    echo "$b: the longest context that links into the SRAM budget is $lo (ctx $hi overflows)"
done
exit $status
