#!/usr/bin/env bash
# Run the end-to-end tests of the wisp command (tests/cli/test_*.sh). Each
# script exits 0 (pass), 77 (skip, printing why) or anything else (fail).
# Environment: WISP (the binary), TOOLS (test tools), WISP_SHARED, WORK.
set -u
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$WORK"
pass=0; fail=0; skip=0; failed=()
for t in "$here"/cli/test_*.sh; do
    name=$(basename "$t" .sh)
    log="$WORK/$name.log"
    start=$EPOCHREALTIME
    bash "$t" >"$log" 2>&1
    rc=$?
    secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')
    case $rc in
        0)  pass=$((pass+1)); printf 'PASS  %-32s %6ss  %s\n' "$name" "$secs" "$(tail -n1 "$log")" ;;
        77) skip=$((skip+1)); printf 'SKIP  %-32s %s\n' "$name" "$(grep -m1 '^SKIP' "$log")" ;;
        *)  fail=$((fail+1)); failed+=("$name"); printf 'FAIL  %-32s (exit %d)\n' "$name" "$rc"
            sed 's/^/      | /' "$log" | tail -n 40 ;;
    esac
done
echo "cli tests: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
