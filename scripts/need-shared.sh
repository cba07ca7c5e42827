#!/usr/bin/env bash
# need-shared.sh DIR: the test suite reads its models, golden references and
# data from the shared folder (../shared beside the checkout, or SHARED=DIR).
# Without it nearly every test would fail one by one after an hour of
# building; this stops `make test` at once instead, naming what is missing.
set -u
dir=${1:?usage: need-shared.sh DIR}
missing=()
for sub in README.md models golden data; do
    [ -e "$dir/$sub" ] || missing+=("$dir/$sub")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "FAIL: the shared test data is missing: ${missing[*]}" >&2
    echo "  the tests read models, golden references and data from ../shared beside the" >&2
    echo "  checkout; point them elsewhere with: make test SHARED=/path/to/shared" >&2
    exit 1
fi
