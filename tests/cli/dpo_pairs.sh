# Sourced by the DPO tests: synthetic preference pairs whose chosen answer always ends the story
# the same happy way (so a short run can learn the preference), and a reader of log.csv's columns.
command -v python3 >/dev/null || fail "python3 is needed to make the synthetic pairs"

# make_pairs SEED N FILE [chat]: N pairs drawn with SEED into FILE; plain strings (trl's standard
# form), or with `chat` conversational pairs (lists of messages)
make_pairs() {
    python3 - "$1" "$2" "$3" "${4:-plain}" <<'PY' || fail "making the pairs"
import json, random, sys
seed, n, out, form = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
rng = random.Random(seed)
names = ["Lily", "Tom", "Sam", "Max", "Mia", "Ben", "Sue", "Tim", "Anna", "Jack", "Lucy", "Bob"]
animals = ["cat", "dog", "bird", "bunny", "bear", "fish", "frog", "duck"]
adjs = ["little", "big", "happy", "small", "kind", "funny"]
things = ["ball", "kite", "toy", "car", "book", "hat", "cake", "box"]
places = ["park", "garden", "house", "forest", "yard", "school"]
other_endings = ["The dog ran away.", "It was dark.", "He was sad.", "She cried.", "Then it rained.", "They went home."]
happy = " They all lived happily ever after."
with open(out, "w") as f:
    for _ in range(n):
        if form == "chat":
            nm, an, th = (rng.choice(x) for x in (names, animals, things))
            body = f"{nm} liked the {th}."
            pair = {"prompt": [{"role": "user", "content": f"A {an} named {nm}."}],
                    "chosen": [{"role": "assistant", "content": body + happy}],
                    "rejected": [{"role": "assistant", "content": body + " " + rng.choice(other_endings)}]}
        else:
            nm, an, ad, th, pl = (rng.choice(x) for x in (names, animals, adjs, things, places))
            body = f" {nm} liked to play with a {th} in the {pl}."
            pair = {"prompt": f"Once upon a time, there was a {ad} {an} named {nm}.",
                    "chosen": body + happy, "rejected": body + " " + rng.choice(other_endings)}
        f.write(json.dumps(pair) + "\n")
PY
}

# col RUN_DIR NAME STEP: column NAME of the run's log.csv at STEP
col() {
    awk -F, -v name="$2" -v step="$3" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i; next }
        $1 == step { print $c }' "$1/log.csv"
}
