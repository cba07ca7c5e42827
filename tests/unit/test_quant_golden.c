/* Against the reference files in ../shared (skips, exit 77, without them):
 *  - dequantization of every tensor named in golden/dequant/index.json
 *    (tensors of the synthetic GGUF models, one file per GGML type), compared
 *    bit for bit with the reference values;
 *  - wisp's quantizers applied to the F32 synthetic models' weights, against
 *    the quantized synthetic models made from the same weights by llama.cpp:
 *    Q8_0, F16 and BF16 must reproduce its bytes exactly (same scheme), and
 *    every other type must come out no less accurate. */
#include "check.h"
#include "gguf.h"
#include "types.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

static const wisp_type_info *info(int type) { return wisp_type_info_of(type); }

static size_t row_bytes(int type, int64_t n) { return wisp_type_row_bytes(type, n); }

/* ---- golden dequantization ------------------------------------------------------ */

/* index.json: {model: {tensor: {"file": s, "type": s, "ne": [..], "count": n}}}.
 * A tiny scanner for exactly that shape (strings without escapes). */
typedef struct golden_entry {
    char model[96], tensor[96], file[192], type[24];
    int64_t ne[4];
    int n_ne;
    int64_t count;
} golden_entry;

typedef struct scanner {
    const char *p;
    bool ok;
} scanner;

static void skip_ws(scanner *s) {
    while (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t') s->p++;
}

static bool accept(scanner *s, char c) {
    skip_ws(s);
    if (*s->p != c) return false;
    s->p++;
    return true;
}

static void expect(scanner *s, char c) {
    if (!accept(s, c)) s->ok = false;
}

static void scan_string(scanner *s, char *out, size_t cap) {
    skip_ws(s);
    if (*s->p != '"') {
        s->ok = false;
        return;
    }
    s->p++;
    size_t n = 0;
    while (*s->p && *s->p != '"') {
        if (*s->p == '\\' || n + 1 >= cap) s->ok = false;
        if (n + 1 < cap) out[n++] = *s->p;
        s->p++;
    }
    out[n] = 0;
    if (*s->p != '"') s->ok = false;
    else s->p++;
}

static int64_t scan_int(scanner *s) {
    skip_ws(s);
    char *end;
    long long v = strtoll(s->p, &end, 10);
    if (end == s->p) s->ok = false;
    s->p = end;
    return v;
}

static int parse_index(const char *json, golden_entry *out, int cap) {
    scanner s = {json, true};
    int n = 0;
    expect(&s, '{');
    while (s.ok && !accept(&s, '}')) {
        char model[96];
        scan_string(&s, model, sizeof model);
        expect(&s, ':');
        expect(&s, '{');
        while (s.ok && !accept(&s, '}')) {
            golden_entry e;
            memset(&e, 0, sizeof e);
            memcpy(e.model, model, sizeof e.model);
            scan_string(&s, e.tensor, sizeof e.tensor);
            expect(&s, ':');
            expect(&s, '{');
            while (s.ok && !accept(&s, '}')) {
                char key[32];
                scan_string(&s, key, sizeof key);
                expect(&s, ':');
                if (!strcmp(key, "file")) scan_string(&s, e.file, sizeof e.file);
                else if (!strcmp(key, "type")) scan_string(&s, e.type, sizeof e.type);
                else if (!strcmp(key, "count")) e.count = scan_int(&s);
                else if (!strcmp(key, "ne")) {
                    expect(&s, '[');
                    while (s.ok && !accept(&s, ']')) {
                        int64_t v = scan_int(&s);
                        if (e.n_ne < 4) e.ne[e.n_ne] = v;
                        e.n_ne++;
                        accept(&s, ',');
                    }
                } else s.ok = false;
                accept(&s, ',');
            }
            if (s.ok && n < cap) out[n++] = e;
            accept(&s, ',');
        }
        accept(&s, ',');
    }
    return s.ok ? n : -1;
}

static void test_golden_dequant(void) {
    const char *index_path = shared_path_or_skip("test_quant_golden", "golden/dequant/index.json");
    unsigned char *json = read_file(index_path, NULL);
    REQUIRE(json != NULL, "cannot read %s", index_path);
    static golden_entry entries[256];
    const int n = parse_index((const char *)json, entries, 256);
    free(json);
    REQUIRE(n >= 50, "index.json parsed to %d entries", n);

    int files_ok = 0;
    bool type_seen[WISP_TYPE_COUNT] = {false};
    for (int i = 0; i < n; i++) {
        const golden_entry *e = &entries[i];
        char rel[256];
        snprintf(rel, sizeof rel, "models/synthetic/%.95s.gguf", e->model);
        const char *model_path = shared_path(rel);
        CHECK(model_path != NULL, "model %s is missing", rel);
        if (!model_path) continue;
        size_t model_size = 0;
        unsigned char *model = read_file(model_path, &model_size);
        CHECK(model != NULL, "cannot read %s", model_path);
        if (!model) continue;
        wisp_gguf g;
        wisp_error err;
        wisp_gguf_tensor t;
        if (wisp_gguf_open(&g, model, model_size, &err) != WISP_OK) {
            CHECK(false, "%s: %s", rel, err.message);
            free(model);
            continue;
        }
        if (!wisp_gguf_find_tensor(&g, e->tensor, &t)) {
            CHECK(false, "%s: no tensor %s", rel, e->tensor);
            free(model);
            continue;
        }
        const int type = wisp_type_from_name(e->type);
        CHECK(type >= 0 && (int)t.type == type, "%s %s: file type %u, index says %s", e->model, e->tensor, t.type,
              e->type);
        CHECK(e->n_ne >= 1 && t.ne[0] == e->ne[0] && (e->n_ne < 2 || t.ne[1] == e->ne[1]), "%s %s: shape",
              e->model, e->tensor);
        const int64_t count = t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3];
        CHECK(count == e->count, "%s %s: %lld elements, index says %lld", e->model, e->tensor, (long long)count,
              (long long)e->count);
        snprintf(rel, sizeof rel, "golden/dequant/%.191s", e->file);
        const char *gold_path = shared_path(rel);
        size_t gold_size = 0;
        unsigned char *gold = gold_path ? read_file(gold_path, &gold_size) : NULL;
        CHECK(gold != NULL && gold_size == (size_t)count * 4, "%s: missing or wrong size", rel);
        const wisp_type_info *ti = info((int)t.type);
        if (gold && gold_size == (size_t)count * 4 && ti && ti->dequantize && type == (int)t.type) {
            float *out = malloc((size_t)count * sizeof(float));
            /* row by row, as the engine will call it */
            const size_t rb = row_bytes(type, t.ne[0]);
            for (int64_t r = 0; r < count / t.ne[0]; r++)
                ti->dequantize((const uint8_t *)t.data + r * rb, out + r * t.ne[0], t.ne[0]);
            int64_t mismatches = 0, first = -1;
            for (int64_t k = 0; k < count; k++) {
                if (memcmp(out + k, gold + 4 * k, 4) != 0) {
                    if (first < 0) first = k;
                    mismatches++;
                }
            }
            if (mismatches) {
                float want;
                memcpy(&want, gold + 4 * first, 4);
                CHECK(false, "%s %s (%s): %lld of %lld values differ; first at %lld: %.9g, want %.9g", e->model,
                      e->tensor, e->type, (long long)mismatches, (long long)count, (long long)first,
                      (double)out[first], (double)want);
            } else {
                files_ok++;
                if (type < WISP_TYPE_COUNT) type_seen[type] = true;
                check_count++;
            }
            free(out);
        }
        free(gold);
        free(model);
    }
    printf("golden dequant: %d of %d tensors bit-exact\n", files_ok, n);
    const int must[] = {WISP_TYPE_F16, WISP_TYPE_BF16, WISP_TYPE_Q4_0, WISP_TYPE_Q4_1, WISP_TYPE_Q5_0,
                        WISP_TYPE_Q5_1, WISP_TYPE_Q8_0, WISP_TYPE_Q2_K, WISP_TYPE_Q3_K, WISP_TYPE_Q4_K,
                        WISP_TYPE_Q5_K, WISP_TYPE_Q6_K};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        CHECK(type_seen[must[i]], "no golden tensor of type %s verified", info(must[i])->name);
}

/* ---- wisp's quantizers vs the reference files -------------------------------- */

typedef struct model_file {
    unsigned char *bytes;
    wisp_gguf g;
} model_file;

static bool open_model(const char *name, model_file *m) {
    char rel[128];
    snprintf(rel, sizeof rel, "models/synthetic/%s.gguf", name);
    const char *path = shared_path(rel);
    size_t size = 0;
    wisp_error err;
    m->bytes = path ? read_file(path, &size) : NULL;
    if (!m->bytes) {
        CHECK(false, "cannot read %s", rel);
        return false;
    }
    if (wisp_gguf_open(&m->g, m->bytes, size, &err) != WISP_OK) {
        CHECK(false, "%s: %s", rel, err.message);
        free(m->bytes);
        return false;
    }
    return true;
}

/* Quantize each tensor of `base` (F32) to the type the same tensor has in
 * `quant`, and compare with the file: byte for byte for the types whose
 * quantizer follows llama.cpp's scheme, by error against the F32 originals for
 * the others. */
static void compare_quantizer(const char *base, const char *quant) {
    model_file mf, mq;
    if (!open_model(base, &mf)) return;
    if (!open_model(quant, &mq)) {
        free(mf.bytes);
        return;
    }
    size_t cursor = 0;
    wisp_gguf_tensor tq, tf;
    double err_file = 0, err_wisp = 0, norm = 0;
    int64_t bytes_differ = 0, tensors = 0;
    bool exact_scheme = true;
    while (wisp_gguf_next_tensor(&mq.g, &cursor, &tq)) {
        if (tq.type == WISP_TYPE_F32) continue; /* norms stay F32 */
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)tq.name.len, tq.name.ptr);
        if (!wisp_gguf_find_tensor(&mf.g, name, &tf) || tf.type != WISP_TYPE_F32) {
            CHECK(false, "%s: %s has no F32 original in %s", quant, name, base);
            continue;
        }
        const wisp_type_info *ti = info((int)tq.type);
        REQUIRE(ti && ti->quantize && ti->dequantize, "%s: %s has type %u", quant, name, tq.type);
        exact_scheme = exact_scheme && (tq.type == WISP_TYPE_Q8_0 || tq.type == WISP_TYPE_F16 ||
                                        tq.type == WISP_TYPE_BF16);
        const int64_t n = tq.ne[0] * tq.ne[1] * tq.ne[2] * tq.ne[3];
        const size_t nb = row_bytes((int)tq.type, n);
        float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
        float *z = malloc((size_t)n * sizeof(float));
        unsigned char *q = malloc(nb);
        memcpy(x, tf.data, (size_t)n * sizeof(float));
        ti->quantize(x, q, n);
        ti->dequantize(q, z, n);
        ti->dequantize(tq.data, y, n);
        for (size_t k = 0; k < nb; k++) bytes_differ += q[k] != ((const unsigned char *)tq.data)[k];
        for (int64_t k = 0; k < n; k++) {
            err_file += ((double)y[k] - x[k]) * ((double)y[k] - x[k]);
            err_wisp += ((double)z[k] - x[k]) * ((double)z[k] - x[k]);
            norm += (double)x[k] * x[k];
        }
        tensors++;
        free(x);
        free(y);
        free(z);
        free(q);
    }
    CHECK(tensors > 0, "%s: no quantized tensors", quant);
    const double rf = sqrt(err_file / norm), rw = sqrt(err_wisp / norm);
    printf("  %-22s %2lld tensors: relative RMS llama.cpp %.5f, wisp %.5f (%+.1f%%)%s\n", quant, (long long)tensors, rf,
           rw, rf > 0 ? 100.0 * (rw / rf - 1.0) : 0.0, exact_scheme ? (bytes_differ ? "" : ", bytes identical") : "");
    if (exact_scheme) CHECK(bytes_differ == 0, "%s: %lld bytes differ from llama.cpp's", quant, (long long)bytes_differ);
    else CHECK(rw <= rf * 1.001, "%s: wisp's quantizer is less accurate (%.5f) than the file's (%.5f)", quant, rw, rf);
    free(mf.bytes);
    free(mq.bytes);
}

static void test_quantizers_vs_reference(void) {
    static const char *const llama[] = {"f16", "bf16", "q8_0", "q6_k", "q5_0", "q5_1", "q5_k",
                                        "q4_0", "q4_1", "q4_k", "q4_k_m", "q3_k", "q2_k"};
    printf("wisp's quantizers on the F32 synthetic weights vs the quantized synthetic models:\n");
    for (size_t i = 0; i < sizeof llama / sizeof llama[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "syn-llama-gqa-%s", llama[i]);
        compare_quantizer("syn-llama-gqa-f32", name);
    }
    compare_quantizer("syn-qwen2-f32", "syn-qwen2-q8_0");
    compare_quantizer("syn-qwen2-f32", "syn-qwen2-q4_k_m");
}

int main(void) {
    test_golden_dequant();
    test_quantizers_vs_reference();
    return check_report("test_quant_golden");
}
