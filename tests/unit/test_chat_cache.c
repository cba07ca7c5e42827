/* Multi-turn reuse of the KV cache: the second turn of a chat evaluates only
 * the tokens its rendering adds after what the first turn left in the cache
 * (counted), and the logits it ends with equal those of a fresh context that
 * reads the whole conversation at once (relative RMS error below 1e-5).
 * With a lead of embedding rows (a prompt-tuning adapter's virtual tokens),
 * the same holds against a fresh context that reads the rows first, across
 * a second turn, a reset to a shorter conversation, and a sliding window's
 * ring that forgot the rows (evaluated again). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chat_cache.h"
#include "chat_formats.h"
#include "check.h"
#include "sampler.h"
#include "template.h"
#include "tokenizer.h"
#include "wisp.h"

typedef struct model {
    unsigned char *bytes;
    wisp_gguf g;
    void *arena;
    wisp_ctx *ctx;
} model;

static bool open_model(model *m, const char *path) {
    size_t size;
    wisp_error err = {0};
    memset(m, 0, sizeof *m);
    m->bytes = read_file(path, &size);
    if (!m->bytes || wisp_gguf_open(&m->g, m->bytes, size, &err)) return false;
    wisp_config cfg = wisp_config_default();
    cfg.n_ctx = 256;
    cfg.n_batch = 16; /* several steps per prefill */
    wisp_memory_plan plan;
    if (wisp_plan(&m->g, &cfg, &plan, &err)) return false;
    m->arena = aligned_alloc(64, (plan.total + 63) / 64 * 64);
    return wisp_init(&m->ctx, &m->g, &cfg, m->arena, plan.total, &err) == WISP_OK;
}

static void close_model(model *m) {
    free(m->arena);
    free(m->bytes);
}

/* Render msgs with ChatML and tokenize (content literal), BOS first. */
static int32_t chat_tokens(wisp_ctx *ctx, const wisp_chat_message *msgs, size_t n, int32_t *ids, int32_t cap) {
    const char *src = wisp_chat_format_find("chatml")->template;
    size_t bytes = 0, len = 0, n_spans = 0, n_ids = 0;
    wisp_error err = {0};
    if (wisp_template_plan(src, strlen(src), NULL, &bytes, &err)) return -1;
    void *mem = aligned_alloc(64, (bytes + 63) / 64 * 64);
    wisp_template *t = NULL;
    char text[4096];
    wisp_text_span spans[16];
    wisp_template_vars vars = {msgs, n, true, NULL, NULL, 2024, 7, 26, NULL, 0};
    const wisp_tokenizer *tok = wisp_ctx_tokenizer(ctx);
    size_t sb = wisp_tokenizer_scratch_bytes(tok, sizeof text);
    void *scratch = malloc(sb);
    wisp_status s = wisp_template_init(&t, mem, bytes, src, strlen(src), NULL, &err);
    if (!s) s = wisp_template_render_spans(t, &vars, text, sizeof text, &len, spans, 16, &n_spans, &err);
    if (!s) s = wisp_tokenize_literal(tok, text, len, WISP_TOKENIZE_ADD_BOS, spans, n_spans, ids, (size_t)cap, &n_ids,
                                      scratch, sb, &err);
    free(scratch);
    free(mem);
    if (s) fprintf(stderr, "chat_tokens: %s\n", err.message);
    return s ? -1 : (int32_t)n_ids;
}

static void two_turns(void) {
    const char *path = shared_path("models/stories260K.gguf");
    REQUIRE(path, "models/stories260K.gguf missing under WISP_SHARED");
    model a, b;
    REQUIRE(open_model(&a, path) && open_model(&b, path), "open %s", path);
    int32_t cache_mem[256], p1[256], p2[256];
    wisp_chat_cache cache;
    wisp_chat_cache_init(&cache, a.ctx, cache_mem, 256);
    wisp_error err = {0};

    /* turn 1 */
    wisp_chat_message msgs[4] = {{.role = "system", .role_len = 6, .content = "You tell stories.", .content_len = 17}, {.role = "user", .role_len = 4, .content = "Once upon a time", .content_len = 16}};
    int32_t n1 = chat_tokens(a.ctx, msgs, 2, p1, 256), ran = 0;
    REQUIRE(n1 > 0, "turn 1 tokens");
    REQUIRE(wisp_chat_cache_prefill(&cache, a.ctx, p1, n1, &ran, &err) == WISP_OK, "%s", err.message);
    CHECK(ran == n1, "a first turn evaluates all its %d tokens (ran %d)", n1, ran);
    /* a greedy answer of 12 tokens, each evaluated as it is generated */
    wisp_sampler_params sp = wisp_sampler_defaults();
    sp.temperature = 0;
    wisp_sampler sampler;
    wisp_sampler_init(&sampler, &sp);
    int32_t answer[12];
    char text[256];
    size_t text_len = 0;
    for (int i = 0; i < 12; i++) {
        answer[i] = wisp_sample(a.ctx, &sampler, NULL, 0);
        text_len += wisp_token_piece(wisp_ctx_tokenizer(a.ctx), answer[i], text + text_len, sizeof text - text_len);
        if (i < 11) REQUIRE(wisp_chat_cache_push(&cache, a.ctx, answer[i], &err) == WISP_OK, "%s", err.message);
    }
    CHECK(cache.n == n1 + 11, "the cache holds the prompt and the evaluated answer");

    /* turn 2: the answer becomes an assistant message, then a new user message */
    msgs[2] = (wisp_chat_message){.role = "assistant", .role_len = 9, .content = text, .content_len = text_len};
    msgs[3] = (wisp_chat_message){.role = "user", .role_len = 4, .content = "And then?", .content_len = 9};
    int32_t n2 = chat_tokens(a.ctx, msgs, 4, p2, 256);
    REQUIRE(n2 > n1, "turn 2 tokens");
    int32_t common = 0;
    while (common < n2 && common < cache.n && p2[common] == cache.tokens[common]) common++;
    CHECK(common >= n1, "turn 2 starts with turn 1's prompt (%d of %d tokens shared)", common, n1);
    REQUIRE(wisp_chat_cache_prefill(&cache, a.ctx, p2, n2, &ran, &err) == WISP_OK, "%s", err.message);
    CHECK(ran == n2 - common, "turn 2 evaluated %d tokens: exactly the %d after the shared %d", ran, n2 - common, common);
    CHECK(ran < n2 - n1 + 12, "turn 2 evaluated %d tokens, not the %d of the conversation", ran, n2);
    printf("turn 1: %d tokens; turn 2: %d tokens, %d reused from the cache, %d evaluated\n", n1, n2, common, ran);

    /* the same logits as reading the whole conversation from scratch */
    REQUIRE(wisp_eval(b.ctx, p2, n2, &err) == WISP_OK, "%s", err.message);
    int32_t n_vocab = wisp_ctx_hparams(a.ctx)->n_vocab;
    double e = rel_rms(wisp_logits(a.ctx, -1), wisp_logits(b.ctx, -1), (size_t)n_vocab);
    CHECK(e < 1e-5, "reused-cache logits differ from a fresh evaluation: relative RMS %g", e);
    printf("logits after the reused prefix vs fresh: relative RMS %.3g\n", e);

    /* the same prompt again re-evaluates only its last token */
    REQUIRE(wisp_chat_cache_prefill(&cache, a.ctx, p2, n2, &ran, &err) == WISP_OK, "%s", err.message);
    CHECK(ran == 1, "an unchanged prompt evaluates one token, ran %d", ran);
    /* too long a prompt is refused, and the cache is still usable */
    int32_t big[300] = {0};
    CHECK(wisp_chat_cache_prefill(&cache, a.ctx, big, 300, &ran, &err) == WISP_ERR_CAPACITY, "overflow refused");
    close_model(&a);
    close_model(&b);
}

/* Fresh context b reading the lead rows then prompt[0..n): its last logits
 * against a's (relative RMS). */
static double against_fresh(model *a, model *b, const float *lead, int32_t n_lead, const int32_t *prompt, int32_t n) {
    wisp_error err = {0};
    wisp_rewind(b->ctx, 0);
    if (wisp_eval_embeddings(b->ctx, lead, n_lead, &err) || wisp_eval(b->ctx, prompt, n, &err)) {
        fprintf(stderr, "fresh evaluation: %s\n", err.message);
        return 1e9;
    }
    return rel_rms(wisp_logits(a->ctx, -1), wisp_logits(b->ctx, -1), (size_t)wisp_ctx_hparams(a->ctx)->n_vocab);
}

static void led_turns(const char *name, bool windowed) {
    const char *path = shared_path(name);
    REQUIRE(path, "%s missing under WISP_SHARED", name);
    model a, b;
    REQUIRE(open_model(&a, path) && open_model(&b, path), "open %s", path);
    const wisp_hparams *hp = wisp_ctx_hparams(a.ctx);
    enum { N_LEAD = 5 };
    static float lead[N_LEAD * 1024];
    REQUIRE(hp->dim <= 1024, "dim %d", hp->dim);
    for (int32_t i = 0; i < N_LEAD * hp->dim; i++) lead[i] = 0.05f * sinf(0.37f * (float)i + 1.0f);
    int32_t cache_mem[200], p[120];
    for (int32_t i = 0; i < 120; i++) p[i] = 1 + (int32_t)((i * 7919u + 13u) % (uint32_t)(hp->n_vocab - 1));
    wisp_chat_cache cache;
    wisp_chat_cache_init(&cache, a.ctx, cache_mem, 200);
    wisp_chat_cache_lead(&cache, a.ctx, lead, N_LEAD, false);
    wisp_error err = {0};
    int32_t ran = 0;
    /* turn 1: 20 tokens after the lead, then 4 pushed as an answer */
    REQUIRE(wisp_chat_cache_prefill(&cache, a.ctx, p, 20, &ran, &err) == WISP_OK, "%s", err.message);
    CHECK(ran == 20 && wisp_n_past(a.ctx) == N_LEAD + 20, "%s: turn 1 ran %d, n_past %d", name, ran, wisp_n_past(a.ctx));
    double e = against_fresh(&a, &b, lead, N_LEAD, p, 20);
    CHECK(e < 1e-5, "%s: turn 1 led logits differ from a fresh reading: %g", name, e);
    for (int i = 20; i < 24; i++) REQUIRE(wisp_chat_cache_push(&cache, a.ctx, p[i], &err) == WISP_OK, "%s", err.message);
    /* turn 2 extends it: only the new tokens run */
    REQUIRE(wisp_chat_cache_prefill(&cache, a.ctx, p, 100, &ran, &err) == WISP_OK, "%s", err.message);
    CHECK(ran == 76, "%s: turn 2 evaluated %d tokens, not the 76 new ones", name, ran);
    e = against_fresh(&a, &b, lead, N_LEAD, p, 100);
    CHECK(e < 1e-5, "%s: turn 2 led logits differ from a fresh reading: %g", name, e);
    /* a reset: a conversation sharing only its first 6 tokens (a sliding
     * window's ring, 64 positions here, has overwritten the lead by now: it
     * runs again) */
    int32_t q[30];
    for (int32_t i = 0; i < 30; i++) q[i] = i < 6 ? p[i] : p[119 - i];
    REQUIRE(wisp_chat_cache_prefill(&cache, a.ctx, q, 30, &ran, &err) == WISP_OK, "%s", err.message);
    CHECK(windowed ? ran == 30 : ran == 24, "%s: after the reset %d tokens ran (%s)", name, ran,
          windowed ? "the ring forgot the lead: all 30" : "the 24 after the shared 6");
    CHECK(wisp_n_past(a.ctx) == N_LEAD + 30, "%s: n_past %d after the reset", name, wisp_n_past(a.ctx));
    e = against_fresh(&a, &b, lead, N_LEAD, q, 30);
    CHECK(e < 1e-5, "%s: led logits after the reset differ from a fresh reading: %g", name, e);
    printf("%s: lead of %d rows kept across turns and a reset (relative RMS %.3g)\n", name, N_LEAD, e);
    close_model(&a);
    close_model(&b);
}

int main(void) {
    two_turns();
    led_turns("models/stories260K.gguf", false);
    led_turns("models/synthetic/syn-gemma2-f32.gguf", true);
    return check_report("test_chat_cache");
}
