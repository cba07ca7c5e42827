#!/usr/bin/env bash
# run_each.sh LABEL LOGDIR TEST...: run each test (an executable or a .sh
# script), which exits 0 (pass), 77 (skip, printing why) or anything else
# (fail). One line per test, its log's tail on failure, and a summary;
# exits 1 if any test failed.
set -u
label=$1; logs=$2; shift 2
mkdir -p "$logs"
pass=0; fail=0; skip=0; failed=()
for t in "$@"; do
    name=$(basename "$t" .sh)
    log="$logs/$name.log"
    start=$EPOCHREALTIME
    case $t in *.sh) bash "$t" ;; *) "$t" ;; esac >"$log" 2>&1
    rc=$?
    secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')
    case $rc in
        0)  pass=$((pass+1)); printf 'PASS  %-32s %6ss  %s\n' "$name" "$secs" "$(tail -n1 "$log")" ;;
        77) skip=$((skip+1)); printf 'SKIP  %-32s %s\n' "$name" "$(grep -m1 '^SKIP' "$log")" ;;
        *)  fail=$((fail+1)); failed+=("$name"); printf 'FAIL  %-32s (exit %d)\n' "$name" "$rc"
            sed 's/^/      | /' "$log" | tail -n 40 ;;
    esac
done
echo "$label: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
