# Shared helpers for CLI tests (sourced).
set -u
: "${WISP:?}" "${WISP_SHARED:?}" "${WORK:?}"
SHARED=$WISP_SHARED
checks=0
fail() { echo "FAIL: $*"; exit 1; }
ok() { checks=$((checks+1)); }
# need FILE...: stop the whole test loudly if reference files are missing (a
# skip for something missing, which the runners count as a failure)
need() {
    for f in "$@"; do
        [ -e "$SHARED/$f" ] || { echo "SKIP: missing $SHARED/$f (set WISP_SHARED to the shared reference folder)"; exit 77; }
    done
}
# expect_fail CMD...: the command must exit non-zero, print one clear line, and not crash
expect_fail() {
    local out rc
    out=$("$@" 2>&1); rc=$?
    [ $rc -ne 0 ] || fail "expected failure: $*"
    [ $rc -lt 128 ] || fail "crashed (exit $rc): $* :: $out"
    [ -n "$out" ] || fail "no error message: $*"
    ok
}
# asan_runtime: the ASan runtime $WISP links, if it was built with ASan
# (test-sanitize): what must come first in LD_PRELOAD, and what valgrind
# cannot run
asan_runtime() { ldd "$WISP" 2>/dev/null | awk '/libasan/ {print $3; exit}'; }
# skip_platform WHY: what this test checks does not exist on this platform (a
# cross-target run, no such CPU feature): the only skip the runners accept.
# Anything missing (../shared, a tool) is a failure: use need or fail.
skip_platform() { echo "SKIP (platform): $*"; exit 77; }
# done_ok: the verdict; a test that ran no check (an empty case list) fails
done_ok() {
    [ "$checks" -gt 0 ] || fail "no checks ran (an empty case list?)"
    echo "ok: $checks checks"; exit 0
}

# peft_run_files DIR METHOD WHY: a finished finetune --method METHOD run in DIR wrote its PEFT
# folder, config, log, plot and checkpoint, no adapter.gguf (WHY: the method has no GGUF form),
# and config.json records the method
peft_run_files() {
    local f
    for f in peft/adapter_config.json peft/adapter_model.safetensors config.json log.csv loss.svg checkpoint.bin; do
        [ -s "$1/$f" ] || fail "missing $f"
    done
    [ -e "$1/adapter.gguf" ] && fail "a $2 run wrote adapter.gguf ($3)"
    grep -q "\"method\": \"$2\"" "$1/config.json" || fail "config.json does not record the method"
}
