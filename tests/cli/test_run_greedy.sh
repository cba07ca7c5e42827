# Greedy generation with stories260K reproduces the reference story.
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf
expected="Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high."
out=$("$WISP" run -m "$SHARED/models/stories260K.gguf" -p "Once upon a time" -n 64 --temp 0 -q) || fail "wisp run failed"
case "$out" in
    "$expected"*) ok ;;
    *) fail "unexpected text: $out" ;;
esac
# the text continues with a newline and "Lily", as the reference says
case "$out" in
    "$expected"$'\n'Lily*) ok ;;
    *) fail "expected a newline and 'Lily' after the first paragraph: $out" ;;
esac
# same seed, same tokens (sampling)
a=$("$WISP" run -m "$SHARED/models/stories260K.gguf" -p "Once upon a time" -n 40 --seed 7 -q -t 1)
b=$("$WISP" run -m "$SHARED/models/stories260K.gguf" -p "Once upon a time" -n 40 --seed 7 -q -t 2)
[ "$a" = "$b" ] || fail "same seed gave different text with 1 and 2 threads"; ok
c=$("$WISP" run -m "$SHARED/models/stories260K.gguf" -p "Once upon a time" -n 40 --seed 8 -q)
[ "$a" != "$c" ] || fail "different seeds gave the same 40 tokens"; ok
done_ok
