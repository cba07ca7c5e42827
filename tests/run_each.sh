#!/usr/bin/env bash
# run_each.sh LABEL LOGDIR TEST...: run each test (an executable, a .sh or .mjs
# script) and judge it by its exit status and what it printed:
#   0   pass, but only if it said how many checks it ran ("ok: N checks" or
#       "PASS name: N checks", N > 0): a test that checked nothing fails;
#   77  a skip, but only for a fact of the platform (no AVX-512 on this CPU, an
#       ASan build): the test prints "SKIP ... (platform): why" (check_skip_platform
#       in tests/lib/check.h, skip_platform in tests/cli/lib.sh). Any other skip
#       (../shared or a toolchain missing) hides something and FAILS, with its reason;
#   anything else: fail.
# One line per test, its log's tail on failure, and a summary; exits 1 if any
# test failed or there was no test to run. Verdicts are also recorded for
# `make test`'s closing summary when WISP_RESULTS is set (tests/results.sh).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/results.sh"
label=$1; logs=$2; shift 2
mkdir -p "$logs"
results_open "$label"
pass=0; fail=0; skip=0; failed=()
# failed_with NAME WHY: count a failure and show the log's tail
failed_with() {
    fail=$((fail+1)); failed+=("$1")
    printf 'FAIL  %-32s %s\n' "$1" "$2"
    results_add fail "$label: $1" "$2"
    sed 's/^/      | /' "$log" | tail -n 40
}
for t in "$@"; do
    name=$(basename "$t"); name=${name%.sh}; name=${name%.mjs}
    log="$logs/$name.log"
    start=$EPOCHREALTIME
    case $t in *.sh) bash "$t" ;; *.mjs) node "$t" ;; *) "$t" ;; esac >"$log" 2>&1
    rc=$?
    secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')
    case $rc in
        0)  checks=$(sed -En 's/^(ok|PASS)([: ].*)?[^0-9]([0-9]+) checks.*/\3/p' "$log" | tail -n1)
            if [ "${checks:-0}" -gt 0 ]; then
                pass=$((pass+1)); printf 'PASS  %-32s %6ss  %s\n' "$name" "$secs" "$(tail -n1 "$log")"
            else
                failed_with "$name" "exited 0 but ran no check (a test must print 'ok: N checks' with N > 0)"
            fi ;;
        77) why=$(grep -m1 '^SKIP' "$log")
            if [[ $why =~ $PLATFORM_SKIP_RE ]]; then
                skip=$((skip+1)); printf 'SKIP  %-32s %s\n' "$name" "$why"
                results_add skip "$label: $name" "${why#*(platform): }"
            else
                failed_with "$name" "skipped for something missing, which fails the run: ${why:-exit 77 without a SKIP line}"
            fi ;;
        *)  failed_with "$name" "(exit $rc)" ;;
    esac
done
if [ $# -eq 0 ]; then
    fail=$((fail+1)); failed+=("(none)")
    echo "FAIL  no test to run: the list for '$label' is empty"
    results_add fail "$label" "no test to run: the list is empty"
fi
results_add suite "$label" "$pass" "$fail" "$skip"
echo "$label: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
