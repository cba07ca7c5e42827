#!/usr/bin/env bash
# summary.sh RESULTS: add up what every runner of `make test` recorded
# (tests/results.sh): a line per suite, the platform skips and the failures
# with their reasons, the wall time of each part, and the closing line
#   N passed, N failed, N skipped
# Exits 1 if anything failed or no test ran at all.
set -u
root=$1
files=()
while IFS= read -r -d '' f; do files+=("$f"); done < <(find "$root" -type f ! -name '*.log' -print0 2>/dev/null | sort -z)
cat /dev/null "${files[@]+"${files[@]}"}" | awk -F'\t' '
    $1 == "suite" { p += $3; f += $4; s += $5; suite[++n] = sprintf("  %-40s %4d passed, %d failed, %d skipped", $2 ":", $3, $4, $5) }
    $1 == "skip"  { skip[++ns] = sprintf("  SKIP  %s: %s", $2, $3) }
    $1 == "fail"  { fail[++nf] = sprintf("  FAIL  %s: %s", $2, $3) }
    $1 == "time"  { took[++nt] = sprintf("  %-40s %5d s", $2 ":", $3) }
    END {
        if (p + f + s == 0) { f = 1; fail[++nf] = "  FAIL  no test ran at all" }
        print ""
        print "== summary"
        for (i = 1; i <= n; i++) print suite[i]
        if (nt) { print "wall time per part (parts run side by side with make -j):"; for (i = 1; i <= nt; i++) print took[i] }
        if (ns) { print "skipped, facts of this platform (" ns "):"; for (i = 1; i <= ns; i++) print skip[i] }
        if (nf) { print "failed (" nf "):"; for (i = 1; i <= nf; i++) print fail[i] }
        printf "%d passed, %d failed, %d skipped\n", p, f, s
        exit f > 0
    }'
