#!/usr/bin/env bash
# clean_checkout.sh: every build target the READMEs show (`make`, `make
# embedded`, `make web`, `make arm64`, ...) works on a fresh clone, as a
# newcomer types it. Run by `make test-clean-checkout` (part of make test).
#
# The targets are read from README.md, embedded/README.md, web/README.md and
# docs/*.md (`make NAME` in code or backticks), leaving out the ones that run
# rather than build: test*, bench*, demo*, fuzz. The clone is of HEAD plus the
# working tree's uncommitted changes, in a temporary folder with ../shared
# beside it as in a real checkout.
#
# Plain `make` runs first; then each target runs with every build folder
# removed except that native build (build/obj, libwisp.a, wisp), which all of
# them reach through the same rules: so a target that needs a folder another
# target happened to make (the cause of `make embedded` failing on a clean
# checkout) fails here, and the test stays within a few minutes.
# Environment: MAKE_CMD (make, with its job server), SHARED; KEEP=1 keeps the
# clone; CLEAN_SKIP="a b" leaves out targets another part of the run builds
# from a fresh folder of its own (make test: web, arm64, armv7), each named.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/tests/results.sh"
: "${MAKE_CMD:=make}" "${SHARED:=$here/../shared}"
results_open "clean checkout"
pass=0 fail=0 failed=()

tmp=$(mktemp -d "${TMPDIR:-/tmp}/wisp-clean.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT
repo=$tmp/wisp
ln -s "$(realpath "$SHARED")" "$tmp/shared"

# the clone: HEAD, then the uncommitted edits and new files, minus deleted files
git clone -q "$here" "$repo" || { echo "FAIL: git clone $here"; exit 1; }
(cd "$here" && git ls-files -z -m -o --exclude-standard) | (cd "$here" && tar --null -T - -cf -) | tar -xf - -C "$repo"
(cd "$here" && git ls-files -z -d) | (cd "$repo" && xargs -0 -r rm -f)

targets=("")
while read -r t; do
    case $t in test*|bench*|demo*|fuzz) continue ;; esac
    if [[ " ${CLEAN_SKIP:-} " == *" $t "* ]]; then echo "make $t: left to the part of this run that builds it"; continue; fi
    [[ " ${targets[*]} " == *" $t "* ]] || targets+=("$t")
done < <(cd "$repo" && grep -ohE '(`make [a-z][a-z0-9-]*`|^make [a-z][a-z0-9-]*)' README.md embedded/README.md web/README.md docs/*.md |
         sed -E 's/`//g; s/^make //' | sort -u)

for t in "${targets[@]}"; do
    name="make${t:+ $t}"
    [ -n "$t" ] && find "$repo/build" -mindepth 1 -maxdepth 1 ! -name obj ! -name libwisp.a ! -name wisp -exec rm -rf {} +
    log=$tmp/${t:-all}.log
    start=$EPOCHREALTIME
    # make coverage runs both native suites again: here one test of each is
    # enough to show the target builds, runs and reports on a fresh clone
    vars=(); [ "$t" = coverage ] && vars=(COV_SMOKE=1)
    (cd "$repo" && $MAKE_CMD --no-print-directory $t "${vars[@]}") >"$log" 2>&1
    rc=$?
    secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.0f", b-a}')
    if [ $rc -eq 0 ]; then
        pass=$((pass+1)); printf 'PASS  %-24s %4ss\n' "$name" "$secs"
    else
        fail=$((fail+1)); failed+=("$name")
        printf 'FAIL  %-24s exit %d on a clean checkout\n' "$name" $rc
        sed 's/^/      | /' "$log" | tail -n 15
        results_add fail "clean checkout: $name" "exit $rc: $(grep -E 'rror|FAIL' "$log" | tail -n1)"
    fi
done
results_add suite "clean checkout" "$pass" "$fail" 0
echo "clean checkout: $pass passed, $fail failed, 0 skipped"
[ $fail -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
