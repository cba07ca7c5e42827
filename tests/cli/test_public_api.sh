# The library's exported symbols against its public header:
#   - every function core/wisp.h declares is defined by libwisp.a (no
#     declaration left behind by a rename or a removal);
#   - every other global symbol libwisp.a defines is named, one a line, in
#     tests/cli/internal_symbols.txt: adding an export is a decision (declare
#     it in wisp.h, or list it as internal), never an accident;
#   - that list holds nothing stale (no longer exported) and nothing public
#     (also declared in wisp.h), so it stays exact.
# wisp.h includes no internal header, and a program including only it
# compiles (gcc, clang) and links; another, still knowing only wisp.h, loads
# stories260K from ../shared and generates the tokens `wisp run` does. It also prints, for the record, the public
# functions still declared outside wisp.h (marked "public" in the list).
source "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")/../.." && pwd)
lib=$(dirname "$WISP")/libwisp.a
[ -f "$lib" ] || skip_platform "no host libwisp.a next to $WISP (a cross-target run)"
command -v nm >/dev/null || fail "nm is missing (binutils)"
command -v perl >/dev/null || fail "perl is missing: it strips wisp.h's comments"
list=$here/tests/cli/internal_symbols.txt
[ -f "$list" ] || fail "missing $list"
D=$WORK/public-api
rm -rf "$D" && mkdir -p "$D"

# defined global symbols (functions and data) of every member; names the
# compiler makes itself (__odr_asan_gen_..., reserved "__") are not ours
nm -g --defined-only "$lib" | awk 'NF == 3 && $2 ~ /^[TDRB]$/ && $3 !~ /^(__|\.)/ {print $3}' | sort -u >"$D/exported"
[ -s "$D/exported" ] || fail "nm found no symbols in $lib"
# names wisp.h declares as functions: comments stripped (its usage example
# calls functions it does not declare), includes not followed
perl -0777 -pe 's{/\*.*?\*/}{ }gs; s{//[^\n]*}{}g' "$here/core/wisp.h" >"$D/wisp.i" || fail "could not read wisp.h"
grep -oE '\bwisp_[a-z0-9_]+[[:space:]]*\(' "$D/wisp.i" | sed 's/[[:space:]]*($//' | sort -u >"$D/public"
[ -s "$D/public" ] || fail "no function declarations found in wisp.h"
grep -vE '^[[:space:]]*(#|$)' "$list" | awk '{print $1}' | sort -u >"$D/internal"
awk '$2 == "public" {print $1}' "$list" | sort -u >"$D/public_elsewhere"

report() { # TITLE FILE: a named list of what differs
    [ -s "$2" ] || return 0
    echo "$1 ($(wc -l <"$2")):"
    sed 's/^/    /' "$2"
    bad=1
}
bad=0
comm -23 "$D/public" "$D/exported" >"$D/declared_not_defined"
report "declared in wisp.h but not defined by libwisp.a" "$D/declared_not_defined"
comm -23 "$D/exported" "$D/public" | comm -23 - "$D/internal" >"$D/unlisted"
report "exported by libwisp.a but neither declared in wisp.h nor listed in $list" "$D/unlisted"
comm -23 "$D/internal" "$D/exported" >"$D/stale"
report "listed as internal but not exported (remove from the list)" "$D/stale"
comm -12 "$D/internal" "$D/public" >"$D/both"
report "listed as internal but declared in wisp.h" "$D/both"
[ $bad -eq 0 ] || fail "the exported symbols and the public header disagree (see above)"
ok

# every public function is exported under its own name, and the list is
# more than a copy of everything (the check above could pass vacuously)
n_pub=$(wc -l <"$D/public"); n_int=$(wc -l <"$D/internal"); n_exp=$(wc -l <"$D/exported")
[ $((n_pub + n_int)) -eq "$n_exp" ] || fail "public $n_pub + internal $n_int != exported $n_exp"
[ "$n_pub" -gt 20 ] || fail "only $n_pub public functions found in wisp.h: the declaration scan is broken"
ok

# the probe: a symbol that is exported but unlisted must be reported
sed '1d' "$D/internal" | comm -23 "$D/exported" - | comm -23 - "$D/public" >"$D/probe"
[ "$(wc -l <"$D/probe")" -eq 1 ] || fail "dropping one listed symbol should leave exactly it unlisted"
ok

# wisp.h is self-contained: it includes standard headers only, so what a
# caller sees is the public API and nothing of core's internals
leaks=$(grep '#include "' "$here/core/wisp.h")
[ -z "$leaks" ] || fail "wisp.h includes internal headers: $leaks"
ok

# and a program that includes nothing but <wisp.h> (only -Icore on the path)
# compiles warning-free with gcc and clang and links against libwisp.a. An
# instrumented library (test-sanitize's ASan/UBSan, make coverage's gcov) is
# linked by gcc, which built it, with the runtimes it calls; the clang object
# is uninstrumented and links there too. The probe's gcov counts go to $D.
nm -u "$lib" >"$D/undefined" 2>/dev/null || fail "nm could not list $lib's undefined symbols"
runtime=()
grep -q ' __asan_' "$D/undefined" && runtime+=(-fsanitize=address)
grep -q ' __ubsan_' "$D/undefined" && runtime+=(-fsanitize=undefined)
grep -q ' __gcov_' "$D/undefined" && runtime+=(--coverage)
expect="version 0.1.0
kv_type_is_f16 1
status arena too small
part kv_cache
parts 16
lr_at_2 0.2500
error_fits 1"
# build_user SRC NAME CC: compile a program of tests/cli that includes only
# <wisp.h> with CC, pedantic and warning-free, and link it into $D/NAME-CC
build_user() {
    local out=$D/$2-$3 linker=$3
    $3 -std=c11 -Wall -Wextra -Werror -Wpedantic -Wstrict-prototypes -I"$here/core" \
        -c "$here/tests/cli/$1" -o "$out.o" 2>"$out.log" ||
        fail "$3: $1, including only <wisp.h>, does not compile: $(head -5 "$out.log")"
    [ ${#runtime[@]} -eq 0 ] || linker=gcc
    $linker "${runtime[@]}" "$out.o" "$lib" -lm -o "$out" 2>"$out.log" ||
        fail "$3: $1 does not link against $lib: $(head -5 "$out.log")"
}
for c in gcc clang; do
    command -v $c >/dev/null || fail "$c is missing: the public header is checked with gcc and clang"
    build_user public_header_user.c user $c
    out=$(GCOV_PREFIX=$D/gcov "$D/user-$c") || fail "$c: the program failed: $out"
    [ "$out" = "$expect" ] || fail "$c: the program printed
$out
expected
$expect"
    ok
done

# wisp.h alone is enough to generate: public_generate.c opens a real model
# from bytes in memory, plans, makes a context in its own arena, tokenizes,
# evaluates, samples and detokenizes on the best kernel level; its token ids
# and text must be wisp run's, greedy and sampled with a seed (run's default
# top-k/top-p/min-p). Both go the same way through WISP_KERNELS.
model=$SHARED/models/stories260K.gguf
[ -f "$model" ] || fail "missing $model (set WISP_SHARED to the shared reference folder)"
prompt="Once upon a time"
n=24
for c in gcc clang; do
    build_user public_generate.c generate $c
    for sampling in greedy "0.8 42"; do
        if [ "$sampling" = greedy ]; then args=(); run_args=(--temp 0)
        else args=($sampling); run_args=(--temp "${args[0]}" --seed "${args[1]}"); fi
        GCOV_PREFIX=$D/gcov "$D/generate-$c" "$model" "$prompt" $n "${args[@]}" >"$D/generate.out" 2>"$D/generate.err" ||
            fail "$c: public_generate ($sampling) failed: $(cat "$D/generate.err")"
        ids=$("$WISP" run -m "$model" -p "$prompt" -n $n "${run_args[@]}" -t 1 -q --ids) ||
            fail "wisp run --ids ($sampling) failed"
        text=$("$WISP" run -m "$model" -p "$prompt" -n $n "${run_args[@]}" -t 1 -q --no-echo) ||
            fail "wisp run --no-echo ($sampling) failed"
        got_ids=$(sed -n 1p "$D/generate.out"); got_text=$(sed -n 2p "$D/generate.out")
        # the prompt's 5 ids (BOS first) and all n generated: the model does not stop early here
        [ "$(wc -w <<<"$got_ids")" -eq $((5 + n)) ] || fail "$c ($sampling): expected 5 + $n ids, got: $got_ids"
        [ "$got_ids" = "$ids" ] || fail "$c ($sampling): token ids differ from wisp run's
public_generate: $got_ids
wisp run:        $ids"
        [ "$got_text" = "$text" ] || fail "$c ($sampling): text differs from wisp run's
public_generate: $got_text
wisp run:        $text"
        ok
    done
done
# and the two samplings differ, so the seeded one really sampled
[ "$(sed -n 1p "$D/generate.out")" != "$("$WISP" run -m "$model" -p "$prompt" -n $n --temp 0 -t 1 -q --ids)" ] ||
    fail "sampling at temperature 0.8 gave the greedy ids"
ok

echo "public functions: $n_pub in wisp.h, $(wc -l <"$D/public_elsewhere") declared elsewhere ($(tr '\n' ' ' <"$D/public_elsewhere"));" \
    "internal exports: $((n_int - $(wc -l <"$D/public_elsewhere")))"
done_ok
