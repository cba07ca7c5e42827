/* Tokenizer behaviour beyond the reference vectors: decoding round trips on
 * every vocabulary, the Llama 2 and stories260K vocabularies inside model
 * files, special-token parsing, BOS/EOS, capacity and scratch errors, and
 * robustness against invalid UTF-8, empty and huge inputs. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* opendir, strdup */
#endif
#include <dirent.h>

#include "test_tokenizer_util.h"

/* ---- helpers ---- */

static bool ids_equal(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

static void print_ids(const char *label, const int32_t *ids, size_t n) {
    fprintf(stderr, "  %s:", label);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

/* Encode s and check that decoding gives it back (SPM: without the added
 * prefix space; WordPiece: re-encoding the decoded text gives the same ids,
 * since BERT's normalisation is lossy). */
static void check_round_trip(const loaded_vocab *v, const char *name, const char *s, size_t len) {
    int32_t *ids;
    size_t n;
    wisp_error err = {0};
    wisp_status st = encode_alloc(&v->tok, s, len, 0, &ids, &n, &err);
    CHECK(st == WISP_OK, "%s: %s", name, err.message);
    size_t dl;
    char *back = detok_alloc(&v->tok, ids, n, WISP_DETOKENIZE_STRIP_PREFIX, &dl);
    if (v->tok.kind == WISP_VOCAB_WPM) {
        int32_t *again;
        size_t n2;
        st = encode_alloc(&v->tok, back, dl, 0, &again, &n2, &err);
        bool has_unk = false;
        for (size_t i = 0; i < n; i++) has_unk |= ids[i] == v->tok.unk;
        CHECK(st == WISP_OK && (has_unk || ids_equal(ids, n, again, n2)), "%s: re-encoding the decoded text differs",
              name);
        free(again);
    } else {
        bool same = dl == len && memcmp(back, s, len) == 0;
        CHECK(same, "%s: round trip differs", name);
        if (!same) {
            fprintf(stderr, "  text: ");
            print_escaped(stderr, s, len);
            fprintf(stderr, "\n  back: ");
            print_escaped(stderr, back, dl);
            fprintf(stderr, "\n");
        }
    }
    free(back);
    free(ids);
}

static const char *const extra_strings[] = {
    "The quick brown fox jumps over the lazy dog.",
    "  leading and trailing spaces  ",
    "tabs\tand\nnewlines\r\nmixed \n\n\n  \t ",
    "Ünïcödé çåsès: Ærøskøbing, Ελληνικά, русский, עברית, العربية, हिन्दी",
    "日本語のテキストと한국어 텍스트와 中文文本",
    "emoji 👩‍👩‍👧‍👦 🇫🇷 🏳️‍🌈 ✨🔥💯",
    "code: for (int i = 0; i < n; ++i) { x[i] += y[i] * 2; } // done",
    "numbers 1234567890 3.14159 -42 1e-9 0x1F",
    "I'm sure they'll say it's what we've done, isn't it? 'S 'T 'RE",
    "<s> </s> <unk> <|endoftext|> <|im_start|> [CLS] [SEP]",
    "a",
    " ",
    "\n",
    "combining: e\xcc\x81 a\xcc\x8a n\xcc\x83 (decomposed accents)",
    "zero\xe2\x80\x8bwidth\xe2\x80\x8cjoiners\xc2\xa0nbsp\xe3\x80\x80ideographic space",
};

/* ---- round trips on every vocabulary in the folder ---- */

static void round_trips_all_vocabs(void) {
    const char *dir = shared_path_or_skip("test_tokenizer", VOCAB_DIR);
    DIR *d = opendir(dir);
    REQUIRE(d, "cannot list %s", dir);
    struct dirent *e;
    int tested = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".gguf") != 0) continue;
        char path[1200], inp_path[1300];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        loaded_vocab v;
        if (load_vocab(&v, path) != 0) {
            CHECK(0, "%s does not load", e->d_name);
            continue;
        }
        tested++;
        int before = check_failures;
        snprintf(inp_path, sizeof inp_path, "%s.inp", path);
        size_t inp_size;
        char *inp = (char *)read_file(inp_path, &inp_size);
        if (inp) {
            static char *cases[256];
            static size_t lens[256];
            size_t n = split_cases(inp, inp_size, cases, lens, 256);
            for (size_t i = 0; i < n; i++) check_round_trip(&v, e->d_name, cases[i], lens[i]);
            free(inp);
        }
        for (size_t i = 0; i < sizeof extra_strings / sizeof extra_strings[0]; i++)
            check_round_trip(&v, e->d_name, extra_strings[i], strlen(extra_strings[i]));
        printf("round trip %-34s %s\n", e->d_name, check_failures == before ? "ok" : "FAIL");
        free_vocab(&v);
    }
    closedir(d);
    CHECK(tested > 0, "no vocabulary found");
}

/* ---- vocabularies inside model files ---- */

static void stories260k(void) {
    const char *path = shared_path("models/stories260K.gguf");
    if (!path) {
        printf("skip stories260K: missing\n");
        return;
    }
    loaded_vocab v;
    REQUIRE(load_vocab(&v, path) == 0, "stories260K does not load");
    CHECK(v.tok.kind == WISP_VOCAB_SPM && v.tok.n_vocab == 512, "kind %d n_vocab %d", v.tok.kind, v.tok.n_vocab);
    CHECK(wisp_tokenizer_bos(&v.tok) == 1 && wisp_tokenizer_eos(&v.tok) == 2, "bos/eos");
    CHECK(wisp_tokenizer_add_bos_default(&v.tok), "SPM adds BOS by default");
    CHECK(wisp_tokenizer_is_eog(&v.tok, 2) && !wisp_tokenizer_is_eog(&v.tok, 1), "eog");
    int32_t *ids;
    size_t n;
    wisp_error err = {0};
    const char *text = "Once upon a time";
    CHECK(encode_alloc(&v.tok, text, strlen(text), WISP_TOKENIZE_ADD_BOS, &ids, &n, &err) == WISP_OK, "%s", err.message);
    static const int32_t want[] = {1, 403, 407, 261, 378};
    CHECK(ids_equal(ids, n, want, 5), "'Once upon a time' with BOS");
    if (!ids_equal(ids, n, want, 5)) print_ids("got", ids, n);
    size_t dl;
    char *back = detok_alloc(&v.tok, ids, n, WISP_DETOKENIZE_STRIP_PREFIX, &dl);
    CHECK(dl == strlen(text) && memcmp(back, text, dl) == 0, "decoding gives '%s'", back);
    free(back);
    free(ids);
    /* tok512 has all 256 byte tokens: any text survives */
    for (size_t i = 0; i < sizeof extra_strings / sizeof extra_strings[0]; i++)
        check_round_trip(&v, "stories260K", extra_strings[i], strlen(extra_strings[i]));
    printf("stories260K: %zu table bytes\n", v.table_bytes);
    free_vocab(&v);
}

static void llama2_tiny(void) {
    const char *path = shared_path("models/llama-2-tiny-random.gguf");
    if (!path) {
        printf("skip llama-2-tiny-random: missing\n");
        return;
    }
    loaded_vocab v, ref;
    REQUIRE(load_vocab(&v, path) == 0, "llama-2-tiny-random does not load");
    const char *ref_path = shared_path(VOCAB_DIR "/ggml-vocab-llama-spm.gguf");
    /* same Llama 2 vocabulary as the llama-spm vectors: same ids everywhere */
    bool have_ref = ref_path && load_vocab(&ref, ref_path) == 0;
    for (size_t i = 0; i < sizeof extra_strings / sizeof extra_strings[0]; i++) {
        check_round_trip(&v, "llama-2-tiny", extra_strings[i], strlen(extra_strings[i]));
        if (!have_ref) continue;
        int32_t *a, *b;
        size_t na, nb;
        wisp_error err = {0};
        encode_alloc(&v.tok, extra_strings[i], strlen(extra_strings[i]), WISP_TOKENIZE_ADD_BOS, &a, &na, &err);
        encode_alloc(&ref.tok, extra_strings[i], strlen(extra_strings[i]), WISP_TOKENIZE_ADD_BOS, &b, &nb, &err);
        CHECK(ids_equal(a, na, b, nb), "llama-2-tiny and llama-spm disagree on string %zu", i);
        free(a);
        free(b);
    }
    int32_t *ids;
    size_t n;
    wisp_error err = {0};
    CHECK(encode_alloc(&v.tok, "Hello world", 11, WISP_TOKENIZE_ADD_BOS | WISP_TOKENIZE_ADD_EOS, &ids, &n, &err) == WISP_OK,
          "%s", err.message);
    static const int32_t want[] = {1, 15043, 3186, 2};
    CHECK(ids_equal(ids, n, want, 4), "'Hello world' with BOS and EOS");
    free(ids);
    if (have_ref) free_vocab(&ref);
    free_vocab(&v);
}

/* ---- special tokens ---- */

static loaded_vocab *vocab_or_null(loaded_vocab *v, const char *name) {
    char rel[300];
    snprintf(rel, sizeof rel, "%s/%s", VOCAB_DIR, name);
    const char *path = shared_path(rel);
    if (!path || load_vocab(v, path) != 0) {
        printf("skip %s: missing\n", name);
        return NULL;
    }
    return v;
}

static void expect_ids(const loaded_vocab *v, const char *text, unsigned flags, const int32_t *want, size_t n_want,
                       const char *what) {
    int32_t *ids;
    size_t n;
    wisp_error err = {0};
    wisp_status s = encode_alloc(&v->tok, text, strlen(text), flags, &ids, &n, &err);
    bool ok = s == WISP_OK && ids_equal(ids, n, want, n_want);
    CHECK(ok, "%s", what);
    if (!ok) {
        print_ids("want", want, n_want);
        print_ids("got", ids, n);
    }
    free(ids);
}

static bool contains(const int32_t *ids, size_t n, int32_t id) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id) return true;
    return false;
}

static void special_tokens(void) {
    loaded_vocab v;
    if (vocab_or_null(&v, "ggml-vocab-smollm2.gguf")) {
        const char *chat = "<|im_start|>user\nHi<|im_end|>\n";
        int32_t *ids;
        size_t n;
        wisp_error err = {0};
        encode_alloc(&v.tok, chat, strlen(chat), WISP_TOKENIZE_PARSE_SPECIAL, &ids, &n, &err);
        CHECK(n >= 2 && ids[0] == 1 && contains(ids, n, 2), "<|im_start|>/<|im_end|> parse to 1 and 2");
        size_t dl;
        char *back = detok_alloc(&v.tok, ids, n, WISP_DETOKENIZE_SPECIAL, &dl);
        CHECK(dl == strlen(chat) && memcmp(back, chat, dl) == 0, "special tokens decode back with WISP_DETOKENIZE_SPECIAL");
        free(back);
        back = detok_alloc(&v.tok, ids, n, 0, &dl);
        CHECK(dl == strlen("user\nHi\n") && memcmp(back, "user\nHi\n", dl) == 0, "control tokens decode to nothing");
        free(back);
        free(ids);
        encode_alloc(&v.tok, chat, strlen(chat), 0, &ids, &n, &err);
        CHECK(!contains(ids, n, 1) && !contains(ids, n, 2), "without PARSE_SPECIAL they are plain text");
        back = detok_alloc(&v.tok, ids, n, 0, &dl);
        CHECK(dl == strlen(chat) && memcmp(back, chat, dl) == 0, "plain-text special tokens round trip");
        free(back);
        free(ids);
        CHECK(wisp_tokenizer_is_eog(&v.tok, 2) && wisp_tokenizer_is_eog(&v.tok, 0), "<|im_end|> and <|endoftext|> end generation");
        CHECK(!wisp_tokenizer_is_eog(&v.tok, 1), "<|im_start|> does not");
        CHECK(!wisp_tokenizer_add_bos_default(&v.tok), "smollm2 says add_bos_token = false");
        int32_t one;
        size_t need;
        wisp_status s = wisp_tokenize(&v.tok, "x", 1, WISP_TOKENIZE_ADD_EOS, &one, 1, &need, NULL, 0, &err);
        CHECK(s == WISP_ERR_ARENA, "no scratch: %s", wisp_status_name(s));
        free_vocab(&v);
    }
    if (vocab_or_null(&v, "ggml-vocab-llama-spm.gguf")) {
        static const int32_t with[] = {1, 15043, 2};      /* <s> ▁Hello </s> */
        expect_ids(&v, "<s>Hello</s>", WISP_TOKENIZE_PARSE_SPECIAL, with, 3, "<s>Hello</s> with PARSE_SPECIAL");
        int32_t *ids;
        size_t n;
        wisp_error err = {0};
        encode_alloc(&v.tok, "<s>Hello</s>", 12, 0, &ids, &n, &err);
        CHECK(!contains(ids, n, 1) && !contains(ids, n, 2), "<s> is text without PARSE_SPECIAL");
        free(ids);
        static const int32_t bos_only[] = {1};
        expect_ids(&v, "", WISP_TOKENIZE_ADD_BOS, bos_only, 1, "empty text with BOS");
        expect_ids(&v, "", 0, NULL, 0, "empty text");
        free_vocab(&v);
    }
    if (vocab_or_null(&v, "ggml-vocab-phi-3.gguf")) {
        /* phi-3: whitespace after special tokens is stripped (llama.cpp's rule for this model) */
        static const int32_t want[] = {32010, 15043, 32007};
        expect_ids(&v, "<|user|>\nHello<|end|>\n", WISP_TOKENIZE_PARSE_SPECIAL, want, 3, "phi-3 chat turn");
        CHECK(wisp_tokenizer_is_eog(&v.tok, 32007) && wisp_tokenizer_is_eog(&v.tok, 32000), "phi-3 <|end|> ends generation");
        free_vocab(&v);
    }
    if (vocab_or_null(&v, "ggml-vocab-mpt.gguf")) {
        /* user-defined tokens (runs of spaces) match even without PARSE_SPECIAL */
        static const int32_t want[] = {50274, 12092};
        expect_ids(&v, "    Hello", 0, want, 2, "mpt user-defined spaces");
        free_vocab(&v);
    }
    if (vocab_or_null(&v, "ggml-vocab-bert-bge.gguf")) {
        static const int32_t want[] = {101, 7592, 1010, 2088, 999, 102}; /* [CLS] hello , world ! [SEP] */
        expect_ids(&v, "Hello, World!", WISP_TOKENIZE_ADD_BOS | WISP_TOKENIZE_ADD_EOS, want, 6, "bert [CLS] ... [SEP]");
        static const int32_t accents[] = {7592};
        expect_ids(&v, "H\xc3\xa9LL\xc3\x93", 0, accents, 1, "accents stripped, lowercased: HéLLÓ -> hello");
        static const int32_t decomposed[] = {7592};
        expect_ids(&v, "he\xcc\x81llo", 0, decomposed, 1, "combining mark dropped");
        char longword[300];
        memset(longword, 'a', 150);
        longword[150] = 0;
        static const int32_t unk[] = {100};
        expect_ids(&v, longword, 0, unk, 1, "a word over 100 characters is [UNK]");
        free_vocab(&v);
    }
}

/* ---- capacity, scratch, robustness ---- */

static uint32_t rng_state = 12345;
static uint32_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

static bool has_all_byte_tokens(const wisp_tokenizer *tok) {
    for (int b = 0; b < 256; b++)
        if (tok->byte_tok[b] < 0) return false;
    return true;
}

static void robustness_one(const char *name) {
    loaded_vocab v;
    if (!vocab_or_null(&v, name)) return;
    const wisp_tokenizer *tok = &v.tok;
    wisp_error err = {0};

    /* capacity: reports the size needed, fills what fits */
    const char *text = "Hello world, this is a test of the capacity report.";
    size_t len = strlen(text);
    int32_t *full;
    size_t n_full;
    CHECK(encode_alloc(tok, text, len, 0, &full, &n_full, &err) == WISP_OK, "%s", err.message);
    size_t sb = wisp_tokenizer_scratch_bytes(tok, len);
    void *scratch = malloc(sb);
    int32_t small[3] = {-7, -7, -7};
    size_t need = 0;
    wisp_status s = wisp_tokenize(tok, text, len, 0, small, 2, &need, scratch, sb, &err);
    CHECK(s == WISP_ERR_CAPACITY && need == n_full, "%s: capacity error reports %zu, want %zu", name, need, n_full);
    CHECK(small[0] == full[0] && small[1] == full[1] && small[2] == -7, "%s: the first ids are written, nothing past cap", name);
    s = wisp_tokenize(tok, text, len, 0, NULL, 0, &need, scratch, sb, &err);
    CHECK(s == WISP_ERR_CAPACITY && need == n_full, "%s: cap 0 counts", name);
    /* scratch one byte short */
    s = wisp_tokenize(tok, text, len, 0, small, 3, &need, scratch, sb - 1, &err);
    CHECK(s == WISP_ERR_ARENA, "%s: short scratch gives %s", name, wisp_status_name(s));
    /* misaligned scratch still works */
    void *big = malloc(sb + 8);
    int32_t *again = malloc((n_full + 1) * sizeof *again);
    s = wisp_tokenize(tok, text, len, 0, again, n_full, &need, (char *)big + 3, sb, &err);
    CHECK(s == WISP_OK && ids_equal(again, need, full, n_full), "%s: misaligned scratch", name);
    free(again);
    free(big);
    free(scratch);
    free(full);

    /* random bytes (mostly invalid UTF-8): no crash, ids in range, byte-level BPE and SPM round trip */
    for (int round = 0; round < 200; round++) {
        size_t rl = rng() % 300;
        char *buf = malloc(rl + 1);
        for (size_t i = 0; i < rl; i++) buf[i] = (char)(round % 3 == 0 ? (rng() % 128) : rng());
        int32_t *ids;
        size_t n;
        s = encode_alloc(tok, buf, rl, WISP_TOKENIZE_PARSE_SPECIAL, &ids, &n, &err);
        CHECK(s == WISP_OK, "%s random %d: %s", name, round, err.message);
        bool in_range = true;
        for (size_t i = 0; i < n; i++) in_range &= ids[i] >= 0 && ids[i] < tok->n_vocab;
        CHECK(in_range, "%s random %d: id out of range", name, round);
        free(ids);
        s = encode_alloc(tok, buf, rl, 0, &ids, &n, &err);
        bool must_round_trip = (tok->kind == WISP_VOCAB_SPM || (tok->kind == WISP_VOCAB_BPE && has_all_byte_tokens(tok)));
        if (must_round_trip && tok->n_user_defined == 0) {
            size_t dl;
            char *back = detok_alloc(tok, ids, n, WISP_DETOKENIZE_STRIP_PREFIX, &dl);
            CHECK(dl == rl && memcmp(back, buf, rl) == 0, "%s random %d: bytes do not round trip", name, round);
            free(back);
        }
        free(ids);
        free(buf);
    }

    /* huge repetition and long inputs finish (time is checked in test_tokenizer_speed) */
    size_t hl = 200000;
    char *huge = malloc(hl);
    for (size_t i = 0; i < hl; i++) huge[i] = "aaaaaaa \n"[i % 9];
    int32_t *ids;
    size_t n;
    CHECK(encode_alloc(tok, huge, hl, 0, &ids, &n, &err) == WISP_OK && n > 0, "%s: long input", name);
    free(ids);
    free(huge);
    free_vocab(&v);
}

static void robustness(void) {
    static const char *const names[] = {
        "ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf",     "ggml-vocab-smollm2.gguf",
        "ggml-vocab-bert-bge.gguf",  "ggml-vocab-deepseek-llm.gguf", "ggml-vocab-falcon.gguf",
        "ggml-vocab-deepseek-coder.gguf", "ggml-vocab-phi-3.gguf", "ggml-vocab-mpt.gguf",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) robustness_one(names[i]);
}

static void pieces(void) {
    loaded_vocab v;
    if (vocab_or_null(&v, "ggml-vocab-llama-spm.gguf")) {
        char buf[16];
        CHECK(wisp_token_piece(&v.tok, 15043, buf, sizeof buf) == 6 && memcmp(buf, " Hello", 6) == 0, "▁Hello -> ' Hello'");
        CHECK(wisp_token_piece(&v.tok, 13, buf, sizeof buf) == 1 && buf[0] == '\n', "<0x0A> -> newline");
        CHECK(wisp_token_piece(&v.tok, 1, buf, sizeof buf) == 0, "<s> -> nothing");
        CHECK(wisp_token_piece_ex(&v.tok, 1, WISP_PIECE_SPECIAL, buf, sizeof buf) == 3 && memcmp(buf, "<s>", 3) == 0,
              "<s> with WISP_PIECE_SPECIAL");
        CHECK(wisp_token_piece(&v.tok, 15043, buf, 2) == 6 && buf[0] == ' ' && buf[1] == 'H', "truncated copy, full length");
        CHECK(wisp_token_piece(&v.tok, -1, buf, sizeof buf) == 0 && wisp_token_piece(&v.tok, 32000, buf, sizeof buf) == 0,
              "out-of-range ids give nothing");
        CHECK(wisp_token_lookup(&v.tok, "\xe2\x96\x81Hello", 8) == 15043, "lookup by text");
        free_vocab(&v);
    }
    if (vocab_or_null(&v, "ggml-vocab-gpt-2.gguf")) {
        char buf[16];
        CHECK(wisp_token_piece(&v.tok, 995, buf, sizeof buf) == 6 && memcmp(buf, " world", 6) == 0, "Ġworld -> ' world'");
        CHECK(wisp_token_piece(&v.tok, 50256, buf, sizeof buf) == 0, "<|endoftext|> -> nothing");
        free_vocab(&v);
    }
}

int main(void) {
    round_trips_all_vocabs();
    stories260k();
    llama2_tiny();
    special_tokens();
    pieces();
    robustness();
    return check_report("test_tokenizer");
}
