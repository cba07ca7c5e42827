#include "chat_engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "json.h"
#include "random_seed.h"

void chat_opts_default(chat_opts *o) {
    memset(o, 0, sizeof *o);
    cli_model_opts_default(&o->mo);
    o->n_predict = 512;
    o->sp = wisp_sampler_defaults();
    o->seed = UINT64_MAX;
    o->lora_scale = 1.0f;
}

static char *copy_part(char **at, const char *s, size_t n) {
    if (!s) return NULL;
    char *p = *at;
    memcpy(p, s, n);
    p[n] = 0;
    *at += n + 1;
    return p;
}

bool chat_opts_usable(const chat_opts *o, const char *command) {
    if (!o->mo.model) {
        fprintf(stderr, "wisp %s: missing -m MODEL\n(see: wisp %s --help)\n", command, command);
        return false;
    }
    if (o->n_predict < 1) {
        fprintf(stderr, "wisp %s: -n must be at least 1\n", command);
        return false;
    }
    return true;
}

/* One allocation holds the message's texts, content first, so freeing the
 * content frees them all. */
bool chat_engine_add_message(chat_engine *e, const char *role, const wisp_chat_message *m) {
    if (e->n_msgs == e->cap_msgs) {
        size_t cap = e->cap_msgs ? e->cap_msgs * 2 : 16;
        wisp_chat_message *grown = realloc(e->msgs, cap * sizeof *grown);
        if (!grown) return false;
        e->msgs = grown;
        e->cap_msgs = cap;
    }
    char *block = malloc(m->content_len + m->tool_calls_json_len + m->tool_call_id_len + m->name_len + 4);
    if (!block) return false;
    char *at = block;
    wisp_chat_message c = *m;
    c.role = role;
    c.role_len = strlen(role);
    c.content = copy_part(&at, m->content ? m->content : "", m->content_len);
    c.tool_calls_json = copy_part(&at, m->tool_calls_json, m->tool_calls_json_len);
    c.tool_call_id = copy_part(&at, m->tool_call_id, m->tool_call_id_len);
    c.name = copy_part(&at, m->name, m->name_len);
    e->msgs[e->n_msgs++] = c;
    return true;
}

bool chat_engine_add(chat_engine *e, const char *role, const char *text, size_t len) {
    if (e->n_msgs == e->cap_msgs) {
        size_t cap = e->cap_msgs ? e->cap_msgs * 2 : 16;
        wisp_chat_message *m = realloc(e->msgs, cap * sizeof *m);
        if (!m) return false;
        e->msgs = m;
        e->cap_msgs = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return false;
    memcpy(copy, text, len);
    copy[len] = 0;
    e->msgs[e->n_msgs++] = (wisp_chat_message){.role = role, .role_len = strlen(role), .content = copy, .content_len = len};
    return true;
}

static const char *role_name(const char *role, size_t len) {
    static const char *const known[] = {"system", "user", "assistant", "tool"};
    for (int i = 0; i < 4; i++)
        if (strlen(known[i]) == len && memcmp(known[i], role, len) == 0) return known[i];
    return NULL;
}

static void drop_messages(chat_engine *e, size_t from) {
    for (size_t i = from; i < e->n_msgs; i++) free((char *)e->msgs[i].content);
    e->n_msgs = from;
}

static bool has_system(const chat_engine *e) { return e->n_msgs > 0 && strcmp(e->msgs[0].role, "system") == 0; }

/* The KV cache stays: the next turn reuses what it shares with it (the
 * system prompt) and evaluates the rest. */
void chat_engine_reset(chat_engine *e) {
    drop_messages(e, has_system(e) ? 1 : 0);
    e->first = e->n_msgs;
    e->last.dropped = 0;
}

bool chat_engine_open(chat_engine *e, const chat_opts *o) {
    memset(e, 0, sizeof *e);
    e->o = *o;
    wisp_config cfg = wisp_config_default();
    if (!cli_adapted_session_open(&e->s, &e->ad, &o->loras, o->lora_scale, &o->mo, &cfg)) return false;
    e->tok = wisp_ctx_tokenizer(e->s.ctx);
    if (!cli_chat_template_open(&e->ct, &e->s.gguf, NULL, o->chat_template, NULL, NULL)) {
        cli_session_close(&e->s);
        cli_adapters_close(&e->ad);
        return false;
    }
    if (o->tools && !cli_chat_template_load_tools(&e->ct, o->tools)) {
        chat_engine_close(e);
        return false;
    }
    const char *choice = o->tool_choice ? o->tool_choice : "auto";
    bool required = strcmp(choice, "required") == 0;
    if (!required && strcmp(choice, "auto") != 0 && strcmp(choice, "none") != 0) {
        fprintf(stderr, "wisp: --tool-choice %s: expected auto, required or none\n", choice);
        chat_engine_close(e);
        return false;
    }
    if (o->tool_choice && !o->tools) {
        fprintf(stderr, "wisp: --tool-choice needs --tools\n");
        chat_engine_close(e);
        return false;
    }
    bool no_grammar = true;
    char *answer_gbnf = cli_grammar_text(&o->grammar, &no_grammar, "chat");
    if (!answer_gbnf && !no_grammar) {
        chat_engine_close(e);
        return false;
    }
    if (answer_gbnf && o->tools && strcmp(choice, "none") != 0) {
        fprintf(stderr, "wisp: chat: --tools constrains the answers already; give a grammar or --tools, not both "
                        "(or --tool-choice none)\n");
        free(answer_gbnf);
        chat_engine_close(e);
        return false;
    }
    if (answer_gbnf) { /* every answer must be a sentence of the grammar */
        bool ok = cli_guide_open(&e->guide, e->tok, answer_gbnf, "chat");
        free(answer_gbnf);
        if (!ok) {
            chat_engine_close(e);
            return false;
        }
    }
    if (o->tools && strcmp(choice, "none") != 0) {
        e->tools = cli_tools_family(e->ct.source);
        char *gbnf = cli_tools_gbnf(e->ct.tools_json, e->ct.tools_len, e->tools, required, o->tools_bounded);
        bool ok = gbnf && cli_guide_open(&e->guide, e->tok, gbnf, "chat --tools");
        free(gbnf);
        if (!ok) {
            chat_engine_close(e);
            return false;
        }
    }
    if (!cli_chat_template_set_date(&e->ct, o->date)) {
        fprintf(stderr, "wisp: --date %s: expected YYYY-MM-DD\n", o->date);
        chat_engine_close(e);
        return false;
    }
    e->n_ctx = wisp_ctx_config(e->s.ctx)->n_ctx - e->ad.n_prompt;
    e->cache_mem = malloc(sizeof(int32_t) * (size_t)e->n_ctx);
    e->prompt = malloc(sizeof(int32_t) * (size_t)e->n_ctx);
    if (!e->cache_mem || !e->prompt || (o->system && !chat_engine_add(e, "system", o->system, strlen(o->system)))) {
        fprintf(stderr, "wisp: out of memory\n");
        chat_engine_close(e);
        return false;
    }
    wisp_chat_cache_init(&e->cache, e->s.ctx, e->cache_mem, e->n_ctx);
    wisp_chat_cache_lead(&e->cache, e->s.ctx, e->ad.prompt, e->ad.n_prompt, e->ad.prompt_prefix);
    e->first = e->n_msgs;
    e->o.sp.seed = o->seed == UINT64_MAX ? cli_random_seed() : o->seed;
    wisp_sampler_init(&e->sampler, &e->o.sp);
    return true;
}

void chat_engine_close(chat_engine *e) {
    drop_messages(e, 0);
    free(e->msgs);
    free(e->cache_mem);
    free(e->prompt);
    cli_chat_template_close(&e->ct);
    cli_guide_close(&e->guide);
    cli_session_close(&e->s);
    cli_adapters_close(&e->ad);
    memset(e, 0, sizeof *e);
}

/* The conversation from message `first` on (with the system prompt), rendered
 * and tokenized: content is never read as special tokens. -1 on error. */
static int32_t tokenize_conversation(chat_engine *e, wisp_error *err) {
    size_t n = e->n_msgs - e->first + (has_system(e) && e->first > 0 ? 1 : 0), k = 0;
    wisp_chat_message *view = malloc((n ? n : 1) * sizeof *view);
    if (!view) return wisp_fail(err, WISP_ERR_CAPACITY, "out of memory"), -1;
    if (has_system(e) && e->first > 0) view[k++] = e->msgs[0];
    for (size_t i = e->first; i < e->n_msgs; i++) view[k++] = e->msgs[i];
    char *text = NULL;
    size_t len = 0, cap_spans = n + 1, n_spans = 0, n_ids = 0;
    wisp_text_span *spans = malloc(cap_spans * 8 * sizeof *spans);
    wisp_template_vars vars = {view, n, true, e->ct.bos, e->ct.eos, e->ct.year, e->ct.month, e->ct.day, e->ct.tools_json, e->ct.tools_len};
    size_t cap = 4096;
    for (size_t i = 0; i < n; i++) cap += view[i].content_len + 64;
    wisp_status s = WISP_OK;
    for (;;) { /* grow the text buffer until the rendering fits */
        free(text);
        text = malloc(cap);
        if (!text || !spans) { s = wisp_fail(err, WISP_ERR_CAPACITY, "out of memory"); break; }
        s = wisp_template_render_spans(e->ct.tpl, &vars, text, cap, &len, spans, cap_spans * 8, &n_spans, err);
        if (s == WISP_ERR_CAPACITY && strstr(err->message, "rendered text") && cap < ((size_t)1 << 28)) { cap *= 4; continue; }
        break;
    }
    int32_t result = -1;
    if (!s) {
        /* BOS as the model wants it, unless the template wrote it already */
        unsigned flags = 0;
        int32_t bos = wisp_tokenizer_bos(e->tok);
        if (wisp_tokenizer_add_bos_default(e->tok) && bos >= 0) {
            wisp_str b = wisp_token_text(e->tok, bos);
            if (!(len >= b.len && memcmp(text, b.ptr, b.len) == 0)) flags |= WISP_TOKENIZE_ADD_BOS;
        }
        size_t sb = wisp_tokenizer_scratch_bytes(e->tok, len);
        void *scratch = malloc(sb);
        s = scratch ? wisp_tokenize_literal(e->tok, text, len, flags, spans, n_spans, e->prompt, (size_t)e->n_ctx, &n_ids,
                                            scratch, sb, err)
                    : wisp_fail(err, WISP_ERR_CAPACITY, "out of memory");
        free(scratch);
        if (s == WISP_ERR_CAPACITY && n_ids > (size_t)e->n_ctx) result = -2; /* too long for the context */
        else if (!s) result = (int32_t)n_ids;
    }
    free(text);
    free(spans);
    free(view);
    return result;
}

/* Room an answer needs: its n_predict, but at most a quarter of the context. */
static int32_t answer_room(const chat_engine *e) {
    int32_t q = e->n_ctx / 4;
    return e->o.n_predict < q ? e->o.n_predict : q;
}

static bool fit_context(chat_engine *e, int32_t *n_prompt) {
    wisp_error err = {0};
    int32_t dropped = 0;
    for (;;) {
        int32_t n = tokenize_conversation(e, &err);
        if (n == -1) {
            fprintf(stderr, "wisp chat: %s\n", err.message);
            return false;
        }
        if (n >= 0 && n + answer_room(e) <= e->n_ctx) {
            *n_prompt = n;
            if (dropped) {
                e->last.dropped += dropped;
                fprintf(stderr, "[the context of %d tokens is full: dropped the %d oldest message%s%s]\n", e->n_ctx, dropped,
                        dropped == 1 ? "" : "s", has_system(e) ? "; the system prompt stays" : "");
            }
            return true;
        }
        /* drop the oldest turn: a user message and what follows until the next user message (a system
         * prompt given among the messages is message 0 and stays: it is neither dropped nor counted) */
        size_t from = e->first == 0 && has_system(e) ? 1 : e->first;
        if (e->n_msgs - from <= 1) {
            fprintf(stderr, "wisp chat: the last message alone does not fit in the context of %d tokens with room for an "
                            "answer (raise --ctx)\n", e->n_ctx);
            return false;
        }
        size_t i = from + 1;
        while (i < e->n_msgs - 1 && strcmp(e->msgs[i].role, "user") != 0) i++;
        dropped += (int32_t)(i - from);
        e->first = i;
    }
}

/* Longest stop string, to hold back that many bytes minus one while streaming. */
static size_t longest_stop(const chat_opts *o) {
    size_t m = 0;
    for (int i = 0; i < o->stops.n; i++)
        if (strlen(o->stops.items[i]) > m) m = strlen(o->stops.items[i]);
    return m;
}

static size_t find_stop(const chat_opts *o, const char *text, size_t len, size_t from) {
    size_t best = len;
    for (int i = 0; i < o->stops.n; i++) {
        size_t sl = strlen(o->stops.items[i]);
        for (size_t p = from; sl && p + sl <= len && p < best; p++)
            if (memcmp(text + p, o->stops.items[i], sl) == 0) { best = p; break; }
    }
    return best;
}

bool chat_engine_reply(chat_engine *e, chat_piece_fn out, void *user, volatile sig_atomic_t *interrupt) {
    memset(&e->last, 0, sizeof e->last);
    e->turn++;
    int32_t n_prompt = 0;
    if (!fit_context(e, &n_prompt)) return false;
    int32_t common = 0;
    while (common < n_prompt && common < e->cache.n && e->prompt[common] == e->cache.tokens[common]) common++;
    wisp_error err = {0};
    double t0 = cli_now();
    int32_t ran = 0;
    if (wisp_chat_cache_prefill(&e->cache, e->s.ctx, e->prompt, n_prompt, &ran, &err)) {
        cli_report(e->o.mo.model, &err);
        return false;
    }
    e->last.prompt_tokens = n_prompt;
    e->last.evaluated = ran;
    e->last.reused = n_prompt - ran;
    e->last.prefill_s = cli_now() - t0;
    size_t cap = 4096, len = 0, printed = 0, hold = longest_stop(&e->o);
    char *answer = malloc(cap);
    if (!answer) return false;
    double t1 = cli_now();
    bool ok = true;
    if (e->guide.mem) { /* each answer starts the grammar afresh */
        if (wisp_guide_reset(&e->guide.guide, &err)) {
            cli_report("chat --tools", &err);
            free(answer);
            return false;
        }
        e->sampler.guide = &e->guide.guide;
    }
    for (;;) {
        if (interrupt && *interrupt) { e->last.stopped = true; break; }
        if (e->last.generated >= e->o.n_predict) { e->last.truncated = true; break; }
        int32_t next = wisp_sample(e->s.ctx, &e->sampler, e->cache.tokens, (size_t)e->cache.n);
        if (next < 0 && e->guide.mem && !cli_guide_finished(&e->guide, "chat")) { ok = false; break; }
        if (next < 0 || wisp_tokenizer_is_eog(e->tok, next)) break;
        e->last.generated++;
        size_t n = wisp_token_piece(e->tok, next, NULL, 0);
        if (len + n + 1 > cap) {
            char *bigger = realloc(answer, (cap = (len + n + 1) * 2));
            if (!bigger) { ok = false; break; }
            answer = bigger;
        }
        wisp_token_piece(e->tok, next, answer + len, n);
        size_t before = len;
        len += n;
        size_t stop = find_stop(&e->o, answer, len, before > hold ? before - hold : 0);
        if (stop < len) {
            len = stop;
            break;
        }
        /* print what can no longer be the start of a stop string */
        size_t safe = hold && len >= hold - 1 ? len - (hold - 1) : hold ? 0 : len;
        if (safe > printed) {
            out(user, answer + printed, safe - printed);
            printed = safe;
        }
        if (e->cache.n >= e->n_ctx) { e->last.truncated = true; break; }
        if (wisp_chat_cache_push(&e->cache, e->s.ctx, next, &err)) {
            cli_report(e->o.mo.model, &err);
            ok = false;
            break;
        }
    }
    if (len > printed) out(user, answer + printed, len - printed);
    e->last.decode_s = cli_now() - t1;
    if (ok) ok = chat_engine_add(e, "assistant", answer, len);
    free(answer);
    return ok;
}

void chat_engine_report(const chat_engine *e) {
    if (e->o.quiet) return;
    const chat_stats *s = &e->last;
    fprintf(stderr, "[turn %d: prompt %d tokens, %d reused from the cache, %d evaluated in %.3f s; %d generated in %.3f s (%.1f tok/s)%s%s]\n",
            e->turn, s->prompt_tokens, s->reused, s->evaluated, s->prefill_s, s->generated, s->decode_s,
            s->decode_s > 0 && s->generated > 1 ? (double)(s->generated - 1) / s->decode_s : 0.0,
            s->stopped ? ", stopped" : "", s->truncated ? ", cut at the length limit" : "");
}

bool chat_engine_save(const chat_engine *e, const char *path) {
    size_t cap = 256;
    for (size_t i = 0; i < e->n_msgs; i++) cap += e->msgs[i].content_len * 6 + 64;
    char *buf = malloc(cap);
    if (!buf) return false;
    wisp_json_writer w;
    wisp_jw_init(&w, buf, cap, true);
    wisp_jw_begin_array(&w);
    for (size_t i = 0; i < e->n_msgs; i++) {
        wisp_jw_begin_object(&w);
        wisp_jw_key(&w, "role");
        wisp_jw_string(&w, e->msgs[i].role);
        wisp_jw_key(&w, "content");
        wisp_jw_string_n(&w, e->msgs[i].content, e->msgs[i].content_len);
        wisp_jw_end_object(&w);
    }
    wisp_jw_end_array(&w);
    bool ok = wisp_jw_finish(&w);
    if (ok) {
        buf[w.len] = '\n';
        ok = cli_write_file_atomic(path, buf, w.len + 1);
    }
    free(buf);
    return ok;
}

bool chat_engine_load(chat_engine *e, const char *path) {
    wisp_chat_message *msgs = NULL;
    char *text = NULL;
    size_t n = 0;
    if (!cli_load_messages(path, &msgs, &n, &text)) return false;
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++)
        if (!role_name(msgs[i].role, msgs[i].role_len)) {
            fprintf(stderr, "wisp: %s: message %zu has role \"%.*s\" (system, user, assistant or tool)\n", path, i,
                    (int)msgs[i].role_len, msgs[i].role);
            ok = false;
        }
    if (ok) {
        drop_messages(e, 0);
        for (size_t i = 0; i < n && ok; i++)
            ok = chat_engine_add(e, role_name(msgs[i].role, msgs[i].role_len), msgs[i].content, msgs[i].content_len);
        e->first = has_system(e) ? 1 : 0;
    }
    free(msgs);
    free(text);
    return ok;
}
