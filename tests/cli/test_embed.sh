# wisp embed: one L2-normalized vector per text (mean or last hidden state), the same whatever
# the batch, threads or input route (-p or -f), and clear refusals.
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf
M="$SHARED/models/stories260K.gguf"
dim=$("$WISP" info -m "$M" 2>/dev/null | awk '$1 == "embedding" {print $2}')
# length of each line's vector
norms() { awk '{s=0; for(i=1;i<=NF;i++) s+=$i*$i; printf "%d %.9f\n", NF, sqrt(s)}'; }
# max |a-b| over two outputs of equal shape
maxdiff() { paste -d' ' "$1" "$2" | awk '{n=NF/2; for(i=1;i<=n;i++){d=$i-$(i+n); if(d<0)d=-d; if(d>m)m=d}} END{printf "%.3g\n", m+0}'; }

"$WISP" embed -m "$M" -p "Once upon a time" -p "The dog ran to the park." > "$WORK/embed_mean.txt" || fail "embed"
[ "$(wc -l < "$WORK/embed_mean.txt")" -eq 2 ] || fail "not one line per text"; ok
norms < "$WORK/embed_mean.txt" | awk -v d="$dim" '{ if ($1 != d || $2 < 0.99999 || $2 > 1.00001) exit 1 }' \
    || fail "vectors of dim $dim and length 1: $(norms < "$WORK/embed_mean.txt")"; ok
# --no-normalize keeps the length; dividing by it gives the normalized vector
"$WISP" embed -m "$M" -p "Once upon a time" -p "The dog ran to the park." --no-normalize > "$WORK/embed_raw.txt" || fail "raw"
norms < "$WORK/embed_raw.txt" | awk '{ if ($2 > 0.999 && $2 < 1.001) exit 1 }' || fail "raw vectors have length 1"; ok
awk '{s=0; for(i=1;i<=NF;i++) s+=$i*$i; s=sqrt(s); for(i=1;i<=NF;i++) printf "%s%.9g", (i>1?" ":""), $i/s; print ""}' \
    "$WORK/embed_raw.txt" > "$WORK/embed_scaled.txt"
d=$(maxdiff "$WORK/embed_mean.txt" "$WORK/embed_scaled.txt")
awk -v d="$d" 'BEGIN{exit !(d < 1e-6)}' || fail "raw/|raw| differs from the normalized vector by $d"; ok
# last pooling is another vector
"$WISP" embed -m "$M" -p "Once upon a time" -p "The dog ran to the park." --pooling last > "$WORK/embed_last.txt" || fail "last"
d=$(maxdiff "$WORK/embed_mean.txt" "$WORK/embed_last.txt")
awk -v d="$d" 'BEGIN{exit !(d > 1e-3)}' || fail "mean and last pooling agree ($d)"; ok
# the same vectors whatever the batch (steps of 1 and 3 tokens) and thread count
for opts in "-b 1" "-b 3" "-t 1" "-t 2"; do
    "$WISP" embed -m "$M" -p "Once upon a time" -p "The dog ran to the park." $opts > "$WORK/embed_b.txt" || fail "embed $opts"
    d=$(maxdiff "$WORK/embed_mean.txt" "$WORK/embed_b.txt")
    awk -v d="$d" 'BEGIN{exit !(d < 1e-5)}' || fail "embed $opts differs by $d"; ok
done
# -f: one text per non-empty line (CRLF too), the same vectors as -p
printf 'Once upon a time\r\n\nThe dog ran to the park.\n' > "$WORK/embed_texts.txt"
"$WISP" embed -m "$M" -f "$WORK/embed_texts.txt" > "$WORK/embed_file.txt" || fail "embed -f"
cmp -s "$WORK/embed_mean.txt" "$WORK/embed_file.txt" || fail "-f gives other vectors than -p"; ok
# JSON: the same numbers, with the text and its token count (BOS included)
"$WISP" embed -m "$M" -p "Once upon a time" --json > "$WORK/embed.json" || fail "--json"
grep -q "\"dim\": $dim, \"pooling\": \"mean\", \"normalized\": true" "$WORK/embed.json" || fail "json header"; ok
grep -q '{"text": "Once upon a time", "n_tokens": 5, "embedding": \[' "$WORK/embed.json" || fail "json case"; ok
tr -d '\n' < "$WORK/embed.json" | sed 's/.*"embedding": \[\([^]]*\)\].*/\1/' | tr ',' ' ' | awk '{$1=$1; print}' > "$WORK/embed_json.txt"
head -1 "$WORK/embed_mean.txt" > "$WORK/embed_first.txt"
d=$(maxdiff "$WORK/embed_first.txt" "$WORK/embed_json.txt")
awk -v d="$d" 'BEGIN{exit !(d < 1e-6)}' || fail "JSON vector differs from plain by $d"; ok
# refusals
expect_fail "$WISP" embed -m "$M"
expect_fail "$WISP" embed -m "$M" -p hi --pooling max
expect_fail "$WISP" embed -m "$M" -f "$WORK/no_such_file.txt"
printf '\n\n' > "$WORK/embed_blank.txt"
expect_fail "$WISP" embed -m "$M" -f "$WORK/embed_blank.txt"
expect_fail "$WISP" embed -m "$M" --ctx 4 -p "Once upon a time there was a dog"
out=$("$WISP" embed -m "$M" --ctx 4 -p "Once upon a time there was a dog" 2>&1 >/dev/null)
case "$out" in *"text 1"*) ok ;; *) fail "error does not name the text: $out" ;; esac
"$WISP" embed --help | grep -q -- "--pooling mean|last" || fail "--help"; ok
done_ok
