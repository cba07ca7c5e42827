#!/usr/bin/env bash
# coverage.sh BUILD: line and branch coverage per source folder (core, simd,
# adapters, cli) of what the tests run in BUILD executed (a build made with
# --coverage, see `make coverage`), from gcov's per-file summaries. Every .c
# file of a folder counts, including ones no test reached (0%).
set -euo pipefail
build=$1
cd "$(dirname "$0")/.."
printf '%-10s %8s %16s %10s %16s\n' folder lines "(covered/all)" branches "(taken/all)"
for dir in core simd adapters cli; do
    for src in "$dir"/*.c; do
        obj=$build/obj/${src%.c}.o
        # gcov prints, per file it saw: File '...', Lines executed:P% of N,
        # Branches executed:..., Taken at least once:P% of N
        # no .gcda: no test ran it, and gcov counts all of its lines as missed
        [ -f "${obj%.o}.gcno" ] || continue
        gcov -b -n -o "$obj" "$src" 2>/dev/null | awk -v want="$src" '
            /^File / { f = $2; gsub(/\047/, "", f); on = (f == want) }
            on && /^Lines executed:/ { split($2, a, "%"); sub(/^executed:/, "", a[1]); n = $NF; printf "L %d %d\n", a[1] * n / 100 + 0.5, n }
            on && /^Taken at least once:/ { split($4, a, "%"); sub(/^once:/, "", a[1]); n = $NF; printf "B %d %d\n", a[1] * n / 100 + 0.5, n }'
    done | awk -v dir="$dir" '
        $1 == "L" { lc += $2; ln += $3 } $1 == "B" { bc += $2; bn += $3 }
        END { printf "%-10s %7.1f%% %16s %9.1f%% %16s\n", dir, ln ? 100 * lc / ln : 0, lc "/" ln, bn ? 100 * bc / bn : 0, bc "/" bn }'
done
