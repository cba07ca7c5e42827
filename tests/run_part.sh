#!/usr/bin/env bash
# run_part.sh [--build] RESULTS NAME COMMAND...: run one part of `make test`
# (a make target) and make sure its verdict reaches the closing summary.
# The runners inside it record their tests in RESULTS/NAME (tests/results.sh);
# this adds what they cannot say themselves:
#   - the part failed before or after its tests (a build error, a missing
#     toolchain): one failure, with the last error line it printed;
#   - the part ran no test at all: a failure too (--build: a build step, which
#     has no tests).
# Its output also goes to RESULTS/NAME.log. Always exits 0, so that `make test`
# goes on with the other parts; tests/summary.sh gives the verdict.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results.sh"
build_only=0
[ "$1" = --build ] && { build_only=1; shift; }
root=$1 name=$2; shift 2
export WISP_RESULTS=$root/$name
mkdir -p "$WISP_RESULTS"
log=$root/$name.log
start=$SECONDS
"$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
secs=$((SECONDS - start))
# what the runners recorded: suites, and failures among them
read -r suites fails < <(cat /dev/null "$WISP_RESULTS"/* 2>/dev/null |
    awk -F'\t' '$1 == "suite" { n++; f += $4 } END { print n + 0, f + 0 }')
results_open "$name"
results_add time "$name" "$secs"
if [ "$rc" -ne 0 ] && [ "$fails" -eq 0 ]; then
    why=$(grep -E '(^|[^a-z])(FAIL|[Ee]rror)[: ]' "$log" | tail -n1)
    results_add fail "$name" "exit $rc: ${why:-see $log}"
    results_add suite "$name" 0 1 0
elif [ "$rc" -eq 0 ] && [ "$suites" -eq 0 ] && [ $build_only -eq 0 ]; then
    results_add fail "$name" "ran no test"
    results_add suite "$name" 0 1 0
fi
exit 0
