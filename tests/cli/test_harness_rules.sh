# The test harness itself cannot be passed by skipping or by checking nothing:
#   - a CLI test whose case list is empty (done_ok after 0 checks) fails;
#   - run_each.sh fails a test that exits 0 without reporting any check, a test
#     that skips because something is missing (need, check_skip), and an empty
#     list of tests; it counts a platform skip (skip_platform) as a skip;
#   - summary.sh adds the records up into the closing line
#     "N passed, N failed, N skipped" and fails when anything failed;
#   - run_part.sh turns a part that failed before its tests into a failure.
source "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")/.." && pwd)
D=$WORK/harness-rules
rm -rf "$D" && mkdir -p "$D"

# probe NAME BODY: a CLI test script using lib.sh, as the real ones do
probe() {
    { echo "source '$here/cli/lib.sh'"; printf '%s\n' "$2"; } >"$D/$1.sh"
}
probe empty_list 'for c in; do ok; done
done_ok'
probe one_check 'ok
done_ok'
probe no_verdict 'echo "did something, checked nothing"'
probe missing_file 'need no/such/file.gguf
ok; done_ok'
probe platform 'skip_platform "this CPU has no such unit"'

# the empty case list fails on its own, naming why
out=$(bash "$D/empty_list.sh" 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 77 ] || fail "a test with an empty case list exited $rc: $out"
ok
[[ $out == *"no checks ran"* ]] || fail "the empty-list failure does not say why: $out"
ok

# run_each LABEL TEST...: the runner, with its records in $D/results
run_each() { WISP_RESULTS=$D/results "$here/run_each.sh" "$@" 2>&1; }

out=$(run_each "good" "$D/logs" "$D/one_check.sh" "$D/platform.sh"); rc=$?
[ $rc -eq 0 ] || fail "a passing test and a platform skip failed the run: $out"
ok
[ "$(tail -n1 <<<"$out")" = "good: 1 passed, 0 failed, 1 skipped" ] || fail "summary of a pass and a platform skip: $out"
ok

for t in empty_list no_verdict missing_file; do
    out=$(run_each "$t" "$D/logs" "$D/$t.sh"); rc=$?
    [ $rc -eq 1 ] || fail "run_each.sh passed $t (exit $rc): $out"
    grep -q "^$t: 0 passed, 1 failed, 0 skipped$" <<<"$out" || fail "$t was not counted as a failure: $out"
    ok
done
grep -q "no/such/file.gguf" "$D/logs/missing_file.log" || fail "the missing file is not named in the log"
out=$(run_each "missing" "$D/logs" "$D/missing_file.sh")
grep -q "skipped for something missing.*no/such/file.gguf" <<<"$out" || fail "the runner does not say what was missing: $out"
ok

out=$(run_each "nothing" "$D/logs"); rc=$?
[ $rc -eq 1 ] && grep -q "no test to run" <<<"$out" || fail "an empty list of tests passed (exit $rc): $out"
ok

# a part that fails before its tests ran (a build error) is one failure
WISP_RESULTS= "$here/run_part.sh" "$D/results" broken-part bash -c 'echo "error: cannot build"; exit 2' >/dev/null
# a part that ran no test at all is one failure too
WISP_RESULTS= "$here/run_part.sh" "$D/results" empty-part true >/dev/null

# the closing line adds up every record: good (1 pass, 1 skip), empty_list,
# no_verdict, missing_file, missing and nothing (1 failure each), the two parts
out=$("$here/summary.sh" "$D/results"); rc=$?
[ $rc -eq 1 ] || fail "summary.sh exited $rc with failures recorded"
ok
[ "$(tail -n1 <<<"$out")" = "1 passed, 7 failed, 1 skipped" ] || fail "closing line: $(tail -n1 <<<"$out")"
ok
grep -q "broken-part: exit 2: error: cannot build" <<<"$out" || fail "the failed part's reason is not listed: $out"
ok
grep -q "empty-part: ran no test" <<<"$out" || fail "a part that ran no test is not listed: $out"
ok
grep -q "SKIP  good: platform: this CPU has no such unit" <<<"$out" ||
    fail "the platform skip is not listed: $out"
ok
# make test stops at once without the shared data, naming each missing piece
mkdir -p "$D/no-shared"
why=$("$here/../scripts/need-shared.sh" "$D/no-shared" 2>&1); rc=$?
[ $rc -eq 1 ] || fail "need-shared.sh on an empty folder exited $rc: $why"
ok
for sub in README.md models golden data; do
    grep -q "$D/no-shared/$sub" <<<"$why" || fail "the missing $sub is not named: $why"
    ok
done
"$here/../scripts/need-shared.sh" "$WISP_SHARED" >/dev/null 2>&1 || fail "need-shared.sh refuses the real shared folder $WISP_SHARED"
ok
echo "empty case list, no verdict, missing data, missing shared folder, empty test list and failed parts all fail; closing line: $(tail -n1 <<<"$out")"
done_ok
