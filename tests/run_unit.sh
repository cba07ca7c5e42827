#!/usr/bin/env bash
# Run unit test binaries; each exits 0 (pass), 77 (skip, with a reason) or
# anything else (fail). Prints one line per test and a summary; exits 1 if any
# test failed. Usage: run_unit.sh BUILD_DIR BINARY...
set -u
build=$1; shift
pass=0; fail=0; skip=0; failed=()
for bin in "$@"; do
    name=$(basename "$bin")
    log="$build/tests/$name.log"
    start=$EPOCHREALTIME
    "$bin" >"$log" 2>&1
    rc=$?
    secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')
    case $rc in
        0)  pass=$((pass+1)); printf 'PASS  %-32s %6ss  %s\n' "$name" "$secs" "$(tail -n1 "$log")" ;;
        77) skip=$((skip+1)); printf 'SKIP  %-32s %s\n' "$name" "$(grep -m1 '^SKIP' "$log")" ;;
        *)  fail=$((fail+1)); failed+=("$name"); printf 'FAIL  %-32s (exit %d)\n' "$name" "$rc"
            sed 's/^/      | /' "$log" | tail -n 40 ;;
    esac
done
echo "unit tests: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
