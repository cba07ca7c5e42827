# Result records of one `make test` run (sourced by the runners).
#
# Every runner (run_each.sh, cross/run_target.sh, fuzz/run.sh,
# embedded/scripts/test_embedded.sh) reports its verdicts here when
# WISP_RESULTS names a folder; tests/summary.sh adds them up into the closing
# line. Without WISP_RESULTS (a sub-target run by hand) nothing is written.
#
# One file per runner invocation, one record per line, fields split by tabs:
#   suite  LABEL  PASSED  FAILED  SKIPPED
#   skip   NAME   REASON        (a platform skip: a fact of this CPU or build)
#   fail   NAME   REASON
#   time   PART   SECONDS       (run_part.sh: the wall time of one part)

# A platform skip's reason carries this marker; any other skip hides something
# missing (../shared, a toolchain) and fails the test.
PLATFORM_SKIP_RE='^SKIP.*\(platform\): '

results_file=""
# results_open LABEL: start this runner's record file
results_open() {
    [ -n "${WISP_RESULTS:-}" ] || return 0
    mkdir -p "$WISP_RESULTS"
    results_file=$(mktemp "$WISP_RESULTS/$(printf '%s' "$1" | tr -c 'A-Za-z0-9_.-' '_').XXXXXX")
}
# results_add KIND FIELD...: one record (tabs and newlines inside a field become spaces)
results_add() {
    [ -n "$results_file" ] || return 0
    local f line=""
    for f in "$@"; do
        f=${f//$'\t'/ }; f=${f//$'\n'/ }
        line+=${line:+$'\t'}$f
    done
    printf '%s\n' "$line" >>"$results_file"
}
