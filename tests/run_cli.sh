#!/usr/bin/env bash
# Run the end-to-end tests of the wisp command (tests/cli/test_*.sh).
# Environment: WISP (the binary), TOOLS (test tools), WISP_SHARED, WORK.
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$WORK"
exec "$here/run_each.sh" "cli tests" "$WORK" "$here"/cli/test_*.sh
