# Every subcommand explains itself, and usage errors exit 2 with a hint.
source "$(dirname "$0")/lib.sh"
"$WISP" --help | grep -q "usage: wisp COMMAND" || fail "wisp --help"; ok
for c in $("$WISP" --help | awk '/^commands:/{f=1;next} f&&/^  [a-z]/{print $1} /^$/{if(f)exit}'); do
    "$WISP" "$c" --help > "$WORK/help.txt" || fail "wisp $c --help exited non-zero"
    grep -q "^usage: wisp $c" "$WORK/help.txt" || fail "wisp $c --help has no usage line"
    ok
    "$WISP" "$c" --no-such-option > /dev/null 2>&1; rc=$?
    [ $rc -eq 2 ] || fail "wisp $c with an unknown option exited $rc, not 2"; ok
done
"$WISP" no-such-command > /dev/null 2>&1; [ $? -eq 2 ] || fail "unknown command should exit 2"; ok
done_ok
