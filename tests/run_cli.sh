#!/usr/bin/env bash
# Run the end-to-end tests of the wisp command (tests/cli/test_*.sh).
# Environment: WISP (the binary), TOOLS (test tools), WISP_SHARED, WORK;
# CLI_LEAVE_OUT="test_a test_b": tests this run leaves out (a slow run such as
# ASan's names them, and its -full target runs them); CLI_ONLY="test_a": only
# these (a smoke run of a target, such as the clean checkout's make coverage).
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$WORK"
tests=()
for t in "$here"/cli/test_*.sh; do
    n=$(basename "$t" .sh)
    [[ " ${CLI_LEAVE_OUT:-} " == *" $n "* ]] && continue
    [ -z "${CLI_ONLY:-}" ] || [[ " $CLI_ONLY " == *" $n "* ]] || continue
    tests+=("$t")
done
[ -z "${CLI_LEAVE_OUT:-}" ] || echo "cli tests left out of this run: $CLI_LEAVE_OUT"
exec "$here/run_each.sh" "cli tests" "$WORK" "${tests[@]}"
