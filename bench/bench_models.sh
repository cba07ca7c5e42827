# Sourced by the `make bench` scripts: make_model NAME makes $OUT/models/NAME.gguf
# (NAME = SHAPE-TYPE, e.g. tinyllama-1.1b-q4_0) with `wisp make-model`,
# once, with the shape's real vocabulary where $SHARED has it (a synthetic
# one of the same size otherwise: the speed is the same).
# Needs WISP, OUT and SHARED.
make_model() {
    local name=$1 file=$OUT/models/$1.gguf shape type vocab=()
    shape=${name%-*}   # the type is the last dash-separated part (q4_k_m has no dash)
    type=${name##*-}
    [ -f "$file" ] && return 0
    mkdir -p "$OUT/models"
    case $shape in
        smollm2-135m) [ -f "$SHARED/models/tokenizers/smollm2/tokenizer.json" ] &&
                          vocab=(--tokenizer "$SHARED/models/tokenizers/smollm2/tokenizer.json") ;;
        tinyllama-1.1b) [ -f "$SHARED/models/tokenizers/llamacpp-vocab/ggml-vocab-llama-spm.gguf" ] &&
                          vocab=(--vocab-from "$SHARED/models/tokenizers/llamacpp-vocab/ggml-vocab-llama-spm.gguf") ;;
    esac
    echo "making $file"
    # written under another name first: an interrupted run leaves no half file to be reused
    "$WISP" make-model --like "$shape" --type "$type" "${vocab[@]}" -o "$file.part" && mv "$file.part" "$file" || exit 1
}

# Drops FILE's cached pages, so that the first reader (wisp, which maps with
# MADV_HUGEPAGE) brings it back in 2 MiB folios where the filesystem can;
# every engine then reads those same pages. Left as it was, a file cached
# piecemeal by earlier reads keeps those parts in 4 KiB pages: with a fifth
# of each model so, decode measured 3-7% slower on this VM (wisp bench
# reports how much of the file is in 2 MiB pages).
drop_cached() {
    sync "$1" 2>/dev/null
    dd if="$1" iflag=nocache count=0 status=none 2>/dev/null ||
        echo "note: could not drop $1 from the page cache; it is measured as cached"
}
