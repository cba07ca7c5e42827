/* HF tokenizer.json -> GGUF tokenizer metadata.
 *   - SmolLM2's tokenizer.json (byte-level BPE) gives the token list, types
 *     and merges of llama.cpp's ggml-vocab-smollm2.gguf, and tokenizes every
 *     case of its test vectors to exactly the expected ids;
 *   - a SentencePiece-BPE tokenizer.json, built here from llama.cpp's Llama
 *     SPM vocabulary the way Hugging Face's converter builds one (merges from
 *     pieces ordered by score), imports to a vocabulary that tokenizes the
 *     llama-spm vectors exactly;
 *   - config handling (bos/eos/chat template) and malformed inputs. */
#include <string.h>

#include "check.h"
#include "gguf_write.h"
#include "half.h"
#include "hf_tokenizer.h"
#include "json.h"
#include "test_tokenizer_util.h"

/* Import `json` (+ optional config) into an in-memory vocabulary-only GGUF. */
static unsigned char *import(const char *json, size_t len, const wisp_hf_tokenizer_opts *opts, size_t *size,
                             wisp_hf_tokenizer *t, wisp_error *err) {
    size_t nb;
    if (wisp_hf_tokenizer_nodes(json, len, opts, &nb, err)) return NULL;
    void *nodes = malloc(nb ? nb : 8);
    void *tables = NULL;
    unsigned char *out = NULL;
    if (wisp_hf_tokenizer_open(t, json, len, opts, nodes, nb, err)) goto done;
    tables = malloc(t->table_bytes ? t->table_bytes : 8);
    if (wisp_hf_tokenizer_index(t, tables, t->table_bytes, err)) goto done;
    for (int pass = 0; pass < 2; pass++) {
        wisp_mem_sink m;
        wisp_sink s = pass ? wisp_mem_sink_make(&m, out, *size) : wisp_count_sink_make();
        wisp_gguf_write_header(&s, 0, 1 + wisp_hf_tokenizer_kv_count(t), err);
        wisp_gguf_write_kv_str(&s, "general.architecture", "llama", err);
        if (wisp_hf_tokenizer_write(t, &s, err)) {
            free(out);
            out = NULL;
            goto done;
        }
        if (!pass) out = malloc(*size = (size_t)s.written);
    }
done:
    free(nodes);
    free(tables);
    return out;
}

static bool load_from_bytes(loaded_vocab *v, unsigned char *bytes, size_t n) {
    memset(v, 0, sizeof *v);
    wisp_error err = {0};
    v->file = bytes;
    v->file_size = n;
    if (wisp_gguf_open(&v->g, bytes, n, &err) || wisp_tokenizer_plan(&v->g, &v->table_bytes, &err)) {
        fprintf(stderr, "imported GGUF: %s\n", err.message);
        return false;
    }
    v->arena_mem = malloc(v->table_bytes ? v->table_bytes : 1);
    wisp_arena_init(&v->arena, v->arena_mem, v->table_bytes);
    if (wisp_tokenizer_init(&v->tok, &v->g, &v->arena, &err)) {
        fprintf(stderr, "imported GGUF: %s\n", err.message);
        return false;
    }
    return true;
}

/* Every case of NAME.inp tokenizes to the ids of NAME.out. */
static size_t check_vectors(const wisp_tokenizer *tok, const char *name, size_t *n_cases_out) {
    char path[256];
    snprintf(path, sizeof path, VOCAB_DIR "/%s.inp", name);
    size_t inp_size, out_size;
    char *inp = (char *)read_file(shared_path_or_skip("test_hf_tokenizer", path), &inp_size);
    snprintf(path, sizeof path, VOCAB_DIR "/%s.out", name);
    char *outf = (char *)read_file(shared_path_or_skip("test_hf_tokenizer", path), &out_size);
    static char *cases[512];
    static size_t lens[512];
    size_t n_cases = split_cases(inp, inp_size, cases, lens, 512), pass = 0, line = 0;
    for (size_t c = 0; c < n_cases; c++) {
        size_t end = line;
        while (end < out_size && outf[end] != '\n') end++;
        int32_t want[4096];
        size_t n_want = 0;
        for (size_t i = line; i < end && n_want < 4096;) {
            while (i < end && outf[i] == ' ') i++;
            if (i >= end) break;
            int32_t v = 0;
            while (i < end && outf[i] >= '0' && outf[i] <= '9') v = v * 10 + (outf[i++] - '0');
            want[n_want++] = v;
        }
        line = end + 1;
        int32_t *got;
        size_t n_got;
        wisp_error err = {0};
        wisp_status s = encode_alloc(tok, cases[c], lens[c], 0, &got, &n_got, &err);
        bool same = s == WISP_OK && n_got == n_want && memcmp(got, want, n_want * 4) == 0;
        CHECK(same, "%s case %zu differs (%s)", name, c, err.message);
        if (!same) {
            fprintf(stderr, "  text: ");
            print_escaped(stderr, cases[c], lens[c]);
            fprintf(stderr, "\n");
        }
        pass += same;
        free(got);
    }
    free(inp);
    free(outf);
    *n_cases_out = n_cases;
    return pass;
}

/* Compare a string array of two GGUFs element by element. */
static bool same_str_array(const wisp_gguf *a, const wisp_gguf *b, const char *key) {
    wisp_gguf_kv x, y;
    if (!wisp_gguf_find_kv(a, key, &x) || !wisp_gguf_find_kv(b, key, &y) || x.count != y.count) return false;
    const uint8_t *px = x.value, *py = y.value;
    for (uint64_t i = 0; i < x.count; i++) {
        wisp_str sx = wisp_gguf_next_array_str(&px), sy = wisp_gguf_next_array_str(&py);
        if (sx.len != sy.len || memcmp(sx.ptr, sy.ptr, sx.len) != 0) {
            fprintf(stderr, "%s[%llu]: '%.*s' vs '%.*s'\n", key, (unsigned long long)i, (int)sx.len, sx.ptr,
                    (int)sy.len, sy.ptr);
            return false;
        }
    }
    return true;
}

static void test_smollm2(void) {
    const char *jp = shared_path_or_skip("test_hf_tokenizer", "models/tokenizers/smollm2/tokenizer.json");
    const char *gp = shared_path_or_skip("test_hf_tokenizer", VOCAB_DIR "/ggml-vocab-smollm2.gguf");
    size_t len;
    char *json = (char *)read_file(jp, &len);
    REQUIRE(json, "read tokenizer.json");
    wisp_hf_tokenizer *t = malloc(sizeof *t);
    wisp_error err = {0};
    size_t size;
    unsigned char *bytes = import(json, len, NULL, &size, t, &err);
    REQUIRE(bytes, "import: %s", err.message);
    CHECK(!t->spm && strcmp(t->pre, "smollm") == 0 && t->n_vocab == 49152 && t->n_merges == 48900 && t->n_holes == 0,
          "detected %s pre %s, %d tokens, %d merges", t->spm ? "spm" : "gpt2", t->pre, t->n_vocab, t->n_merges);
    CHECK(t->add_bos == 0 && t->add_eos == 0, "no post-processor: nothing added");
    loaded_vocab mine, ref;
    REQUIRE(load_from_bytes(&mine, bytes, size), "imported vocabulary loads");
    REQUIRE(load_vocab(&ref, gp) == 0, "reference vocabulary loads");
    CHECK(same_str_array(&mine.g, &ref.g, "tokenizer.ggml.tokens"), "token list differs from ggml-vocab-smollm2.gguf");
    CHECK(same_str_array(&mine.g, &ref.g, "tokenizer.ggml.merges"), "merges differ from ggml-vocab-smollm2.gguf");
    wisp_str pre;
    CHECK(wisp_gguf_get_str(&mine.g, "tokenizer.ggml.pre", &pre) && wisp_str_eq(pre, "smollm"), "pre");
    int type_diffs = 0;
    for (int32_t i = 0; i < 49152; i++) type_diffs += wisp_token_type_of(&mine.tok, i) != wisp_token_type_of(&ref.tok, i);
    CHECK(type_diffs == 0, "%d token types differ", type_diffs);
    size_t n_cases, pass = check_vectors(&mine.tok, "ggml-vocab-smollm2.gguf", &n_cases);
    printf("smollm2 tokenizer.json: %zu/%zu test cases tokenize exactly as llama.cpp / HF\n", pass, n_cases);
    CHECK(n_cases > 10 && pass == n_cases, "%zu of %zu", pass, n_cases);
    free_vocab(&ref);
    free(mine.arena_mem);
    free(bytes);
    free(json);

    /* with a tokenizer_config.json: special tokens, flags and the chat template */
    static const char cfg[] = "{\"bos_token\": \"<|im_start|>\", \"eos_token\": {\"content\": \"<|im_end|>\"}, "
                              "\"pad_token\": null, \"add_bos_token\": false, \"chat_template\": \"{% for m in "
                              "messages %}\\u003c|im_start|\\u003e{{ m['content'] }}{% endfor %}\", \"x\": 1}";
    json = (char *)read_file(jp, &len);
    wisp_hf_tokenizer_opts o = {cfg, sizeof cfg - 1, NULL, 49160};
    bytes = import(json, len, &o, &size, t, &err);
    REQUIRE(bytes, "import with config: %s", err.message);
    CHECK(t->bos == 1 && t->eos == 2 && t->pad == -1 && t->add_bos == 0 && t->n_vocab == 49160 && t->n_holes == 8,
          "bos %d eos %d pad %d add_bos %d n_vocab %d holes %d", t->bos, t->eos, t->pad, t->add_bos, t->n_vocab,
          t->n_holes);
    REQUIRE(load_from_bytes(&mine, bytes, size), "padded vocabulary loads");
    wisp_str ct;
    CHECK(wisp_gguf_get_str(&mine.g, "tokenizer.chat_template", &ct) &&
              wisp_str_eq(ct, "{% for m in messages %}<|im_start|>{{ m['content'] }}{% endfor %}"),
          "chat template");
    wisp_str last = wisp_token_text(&mine.tok, 49159);
    CHECK(wisp_str_eq(last, "[PAD49159]") && wisp_token_type_of(&mine.tok, 49159) == WISP_TOKEN_UNUSED, "padding");
    CHECK(wisp_tokenizer_bos(&mine.tok) == 1 && wisp_tokenizer_eos(&mine.tok) == 2, "bos/eos");
    free(mine.arena_mem);
    free(bytes);
    free(json);
    free(t);
}

/* ---- SentencePiece BPE ---------------------------------------------------- */

typedef struct spm_merge {
    int32_t left, right;
    float score;
} spm_merge;

static int by_score(const void *a, const void *b) {
    const spm_merge *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->left != y->left) return x->left < y->left ? -1 : 1;
    return (x->right > y->right) - (x->right < y->right);
}

static float score_of(const wisp_gguf_kv *scores, int32_t id) { return wisp_load_f32(scores->value + 4 * (size_t)id); }

/* A tokenizer.json for a SentencePiece vocabulary, as Hugging Face's
 * converter makes one: merges = every split of a normal piece into two
 * pieces, ordered by the piece's score. */
static char *spm_tokenizer_json(const loaded_vocab *v, size_t *len) {
    const wisp_tokenizer *tok = &v->tok;
    int32_t n = wisp_tokenizer_n_vocab(tok);
    wisp_gguf_kv scores;
    if (!wisp_gguf_find_kv(&v->g, "tokenizer.ggml.scores", &scores)) return NULL;
    size_t cap_m = 1 << 20, n_m = 0;
    spm_merge *m = malloc(cap_m * sizeof *m);
    for (int32_t id = 0; id < n; id++) {
        if (wisp_token_type_of(tok, id) != WISP_TOKEN_NORMAL) continue;
        wisp_str s = wisp_token_text(tok, id);
        for (size_t k = 1; k < s.len; k++) {
            if ((s.ptr[k] & 0xc0) == 0x80) continue; /* split between characters only */
            int32_t l = wisp_token_lookup(tok, s.ptr, k), r = wisp_token_lookup(tok, s.ptr + k, s.len - k);
            if (l < 0 || r < 0 || n_m >= cap_m) continue;
            m[n_m++] = (spm_merge){l, r, score_of(&scores, id)};
        }
    }
    qsort(m, n_m, sizeof *m, by_score);
    size_t cap = 8u << 20;
    char *buf = malloc(cap);
    wisp_json_writer w;
    wisp_jw_init(&w, buf, cap, false);
    wisp_jw_begin_object(&w);
    wisp_jw_key(&w, "added_tokens");
    wisp_jw_begin_array(&w);
    for (int32_t id = 0; id < 3; id++) {
        wisp_str s = wisp_token_text(tok, id);
        wisp_jw_begin_object(&w);
        wisp_jw_key(&w, "id");
        wisp_jw_int(&w, id);
        wisp_jw_key(&w, "content");
        wisp_jw_string_n(&w, s.ptr, s.len);
        wisp_jw_key(&w, "special");
        wisp_jw_bool(&w, true);
        wisp_jw_end_object(&w);
    }
    wisp_jw_end_array(&w);
    wisp_jw_key(&w, "normalizer");
    wisp_jw_begin_object(&w);
    wisp_jw_key(&w, "type");
    wisp_jw_string(&w, "Sequence");
    wisp_jw_key(&w, "normalizers");
    wisp_jw_begin_array(&w);
    wisp_jw_begin_object(&w);
    wisp_jw_key(&w, "type");
    wisp_jw_string(&w, "Prepend");
    wisp_jw_key(&w, "prepend");
    wisp_jw_string(&w, "\xe2\x96\x81");
    wisp_jw_end_object(&w);
    wisp_jw_end_array(&w);
    wisp_jw_end_object(&w);
    wisp_jw_key(&w, "pre_tokenizer");
    wisp_jw_null(&w);
    wisp_jw_key(&w, "model");
    wisp_jw_begin_object(&w);
    wisp_jw_key(&w, "type");
    wisp_jw_string(&w, "BPE");
    wisp_jw_key(&w, "unk_token");
    wisp_jw_string(&w, "<unk>");
    wisp_jw_key(&w, "byte_fallback");
    wisp_jw_bool(&w, true);
    wisp_jw_key(&w, "vocab");
    wisp_jw_begin_object(&w);
    for (int32_t id = 0; id < n; id++) {
        wisp_str s = wisp_token_text(tok, id);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)s.len, s.ptr);
        wisp_jw_key(&w, key);
        wisp_jw_int(&w, id);
    }
    wisp_jw_end_object(&w);
    wisp_jw_key(&w, "merges");
    wisp_jw_begin_array(&w);
    for (size_t i = 0; i < n_m; i++) {
        wisp_str l = wisp_token_text(tok, m[i].left), r = wisp_token_text(tok, m[i].right);
        wisp_jw_begin_array(&w);
        wisp_jw_string_n(&w, l.ptr, l.len);
        wisp_jw_string_n(&w, r.ptr, r.len);
        wisp_jw_end_array(&w);
    }
    wisp_jw_end_array(&w);
    wisp_jw_end_object(&w);
    wisp_jw_end_object(&w);
    bool ok = wisp_jw_finish(&w);
    free(m);
    if (!ok) {
        free(buf);
        return NULL;
    }
    *len = w.len;
    return buf;
}

static void test_spm(void) {
    const char *gp = shared_path_or_skip("test_hf_tokenizer", VOCAB_DIR "/ggml-vocab-llama-spm.gguf");
    loaded_vocab ref;
    REQUIRE(load_vocab(&ref, gp) == 0, "llama-spm vocabulary loads");
    size_t len;
    char *json = spm_tokenizer_json(&ref, &len);
    REQUIRE(json, "build tokenizer.json");
    wisp_hf_tokenizer *t = malloc(sizeof *t);
    wisp_error err = {0};
    size_t size;
    unsigned char *bytes = import(json, len, NULL, &size, t, &err);
    REQUIRE(bytes, "import: %s", err.message);
    CHECK(t->spm && t->add_space_prefix && t->unk == 0, "detected spm, prefix, unk");
    loaded_vocab mine;
    REQUIRE(load_from_bytes(&mine, bytes, size), "imported spm vocabulary loads");
    CHECK(same_str_array(&mine.g, &ref.g, "tokenizer.ggml.tokens"), "token list");
    int type_diffs = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) type_diffs += wisp_token_type_of(&mine.tok, i) != wisp_token_type_of(&ref.tok, i);
    CHECK(type_diffs == 0, "%d token types differ", type_diffs);
    size_t n_cases, pass = check_vectors(&mine.tok, "ggml-vocab-llama-spm.gguf", &n_cases);
    printf("llama-spm as tokenizer.json: %zu/%zu test cases tokenize exactly\n", pass, n_cases);
    CHECK(n_cases > 10 && pass == n_cases, "%zu of %zu", pass, n_cases);
    free(mine.arena_mem);
    free(bytes);
    free(json);
    free(t);
    free_vocab(&ref);
}

/* ---- hostile inputs ------------------------------------------------------- */

static void expect_bad(const char *json, const char *needle) {
    wisp_hf_tokenizer *t = malloc(sizeof *t);
    wisp_error err = {0};
    size_t size = 0;
    unsigned char *b = import(json, strlen(json), NULL, &size, t, &err);
    CHECK(!b, "accepted: %s", json);
    CHECK(strstr(err.message, needle) != NULL, "'%s' should mention '%s'", err.message, needle);
    free(b);
    free(t);
}

#define BL "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}"

static void test_hostile(void) {
    expect_bad("{", "JSON");
    expect_bad("[]", "model");
    expect_bad("{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}", "Unigram");
    expect_bad("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}", "neither byte-level");
    expect_bad("{" BL ", \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}, \"merges\": []}}", "not a token id");
    expect_bad("{" BL ", \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}}",
               "two vocabulary entries");
    expect_bad("{" BL ", \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"ab\"]}}", "merge 0");
    expect_bad("{" BL ", \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [[\"a\"]]}}", "merge 0");
    expect_bad("{" BL ", \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"added_tokens\": "
               "[{\"id\": 0, \"content\": \"b\"}]}",
               "differs");
    expect_bad("{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"x\"}}, \"decoder\": {\"type\": "
               "\"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}",
               "not recognised");
    /* a forced pre-tokenizer is accepted */
    static const char ok[] = "{\"pre_tokenizer\": {\"type\": \"Split\"}, \"decoder\": {\"type\": \"ByteLevel\"}, "
                             "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 3}, \"merges\": "
                             "[[\"a\", \"b\"]]}}";
    wisp_hf_tokenizer *t = malloc(sizeof *t);
    wisp_error err = {0};
    wisp_hf_tokenizer_opts o = {NULL, 0, "gpt-2", 0};
    size_t size;
    unsigned char *b = import(ok, sizeof ok - 1, &o, &size, t, &err);
    CHECK(b && t->n_holes == 1 && t->n_notes == 1, "forced pre: %s", err.message);
    free(b);
    o.n_vocab = 2;
    b = import(ok, sizeof ok - 1, &o, &size, t, &err);
    CHECK(!b && strstr(err.message, "ids up to 3"), "n_vocab too small: %s", err.message);
    free(b);
    free(t);
}

/* The pre-tokenizer structures of common byte-level tokenizers (the regexes
 * as Hugging Face spells them) map to llama.cpp's names. */
static void expect_pre(const char *pre_tokenizer, const char *want) {
    char json[1024];
    snprintf(json, sizeof json,
             "{\"pre_tokenizer\": %s, \"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", "
             "\"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\"]}}",
             pre_tokenizer);
    wisp_hf_tokenizer *t = malloc(sizeof *t);
    wisp_error err = {0};
    size_t size;
    unsigned char *b = import(json, strlen(json), NULL, &size, t, &err);
    CHECK(b && strcmp(t->pre, want) == 0, "%s: got '%s' (%s)", want, b ? t->pre : "-", err.message);
    free(b);
    free(t);
}

static void test_pre_detection(void) {
    expect_pre("{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}", "gpt-2");
    expect_pre("{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", \"individual_digits\": true}, "
               "{\"type\": \"ByteLevel\", \"add_prefix_space\": false}]}",
               "smollm");
    static const char split[] =
        "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": "
        "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}%s| "
        "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"}, "
        "\"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
        "\"trim_offsets\": true, \"use_regex\": false}]}";
    char pt[1024];
    snprintf(pt, sizeof pt, split, "{1,3}");
    expect_pre(pt, "llama-bpe");
    snprintf(pt, sizeof pt, split, "");
    expect_pre(pt, "qwen2");
}

int main(void) {
    test_pre_detection();
    test_hostile();
    test_smollm2();
    test_spm();
    return check_report("test_hf_tokenizer");
}
