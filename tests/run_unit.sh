#!/usr/bin/env bash
# Run unit test binaries: run_unit.sh BUILD_DIR BINARY...
build=$1; shift
exec "$(dirname "$0")/run_each.sh" "unit tests" "$build/tests" "$@"
