/* Plain text and JSONL into token windows and loss masks (train_data.h). */
#include "train_data.h"

#include <string.h>

#include "chat_messages.h"
#include "train_rng.h"

#define DEFAULT_PIECE 4096
#define TEMPLATE_MAX 512 /* bytes the Alpaca template adds around a record's fields */
#define CHAT_EXTRA 16384 /* a conversation renders to at most twice its line plus this */
/* Conversations score token by token: their examples say so with this
 * n_prompt, and their unscored ids carry this bit in the token array. */
#define PER_TOKEN_MASK UINT32_MAX
#define UNSCORED_BIT 0x40000000

static const char ALPACA_HEAD[] = "Below is an instruction that describes a task";
static const char ALPACA_WITH_INPUT[] = ", paired with an input that provides further context";
static const char ALPACA_TAIL[] = ". Write a response that appropriately completes the request.\n\n### Instruction:\n";
static const char ALPACA_INPUT[] = "\n\n### Input:\n";
static const char ALPACA_RESPONSE[] = "\n\n### Response:\n";

static size_t piece_limit(const wisp_data_options *o) { return o->piece_bytes ? o->piece_bytes : DEFAULT_PIECE; }

/* Where the next piece of text[0..n) ends: after the last newline run within
 * `limit` bytes, else before the last space, else at a UTF-8 boundary. */
static size_t piece_end(const char *t, size_t n, size_t limit) {
    if (n <= limit) return n;
    for (size_t i = limit; i > 0; i--)
        if (t[i - 1] == '\n' && t[i] != '\n') return i;
    for (size_t i = limit; i > 0; i--)
        if (t[i] == ' ' && t[i - 1] != ' ') return i;
    size_t i = limit;
    while (i > 1 && ((unsigned char)t[i] & 0xC0) == 0x80) i--;
    return i;
}

/* ---- scanning: documents, lines ---- */

static bool blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return false;
    return true;
}

/* The next line [*start, *end) at or after `from` (end excludes the newline); false at the end. */
static bool next_line(const char *t, size_t n, size_t from, size_t *start, size_t *end) {
    if (from >= n) return false;
    size_t e = from;
    while (e < n && t[e] != '\n') e++;
    *start = from;
    *end = e;
    return true;
}

/* Calls fn for each document of plain text: the whole text, or paragraphs
 * between blank lines (trailing newlines of a paragraph are dropped). */
typedef wisp_status (*doc_fn)(void *user, const char *text, size_t n, wisp_error *err);

static wisp_status each_document(const char *t, size_t n, wisp_data_docs docs, doc_fn fn, void *user, wisp_error *err) {
    if (docs == WISP_DOCS_FILE) return blank(t, n) ? WISP_OK : fn(user, t, n, err);
    size_t pos = 0, s, e, doc_start = 0, doc_end = 0;
    bool in_doc = false;
    while (next_line(t, n, pos, &s, &e)) {
        pos = e + 1;
        if (blank(t + s, e - s)) {
            if (in_doc) {
                wisp_status st = fn(user, t + doc_start, doc_end - doc_start, err);
                if (st) return st;
            }
            in_doc = false;
            continue;
        }
        if (!in_doc) doc_start = s;
        in_doc = true;
        doc_end = e;
    }
    return in_doc ? fn(user, t + doc_start, doc_end - doc_start, err) : WISP_OK;
}

typedef struct counter {
    size_t docs, bytes;
} counter;

static wisp_status count_doc(void *user, const char *text, size_t n, wisp_error *err) {
    (void)text, (void)err;
    counter *c = user;
    c->docs++;
    c->bytes += n;
    return WISP_OK;
}

/* ids a text of n bytes can become, at most: one per byte, plus SentencePiece's
 * leading space and slack for each piece */
static size_t token_bound(size_t n, size_t limit) { return n + 3 * (n / (limit / 2 + 1) + 2); }

/* A conversation record's text buffer: its messages and content spans (aligned
 * arrays), the unescaped line, and two renderings. */
typedef struct chat_layout {
    size_t cap_msgs, cap_spans, msgs_at, spans_at, turns_at, piece_spans_at, text_at, full_at, prefix_at, render_cap, total;
} chat_layout;

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

static chat_layout chat_layout_of(size_t line_bytes, size_t json_nodes) {
    chat_layout c;
    c.cap_msgs = json_nodes / 5 + 1; /* a message is at least an object, two keys, two values */
    c.cap_spans = 8 * c.cap_msgs + 8;
    c.render_cap = 2 * line_bytes + CHAT_EXTRA;
    c.msgs_at = 0;
    c.spans_at = align16(c.msgs_at + c.cap_msgs * sizeof(wisp_chat_message));
    c.turns_at = align16(c.spans_at + c.cap_spans * sizeof(wisp_text_span));
    c.piece_spans_at = align16(c.turns_at + c.cap_msgs * sizeof(wisp_text_span));
    c.text_at = align16(c.piece_spans_at + c.cap_spans * sizeof(wisp_text_span));
    c.full_at = c.text_at + line_bytes + 1;
    c.prefix_at = c.full_at + c.render_cap;
    c.total = c.prefix_at + c.render_cap + 16; /* and slack to align the buffer's start */
    return c;
}

static wisp_status plan(const wisp_tokenizer *tok, const char *bytes, size_t n, const wisp_data_options *opt,
                        const wisp_data_chat *chat, wisp_data_plan_info *info, wisp_error *err) {
    memset(info, 0, sizeof *info);
    if (opt->seq_len < 1) return wisp_fail(err, WISP_ERR_ARG, "training data: seq_len must be positive");
    if (!(opt->val_split >= 0 && opt->val_split < 1)) return wisp_fail(err, WISP_ERR_ARG, "val_split must be in [0, 1)");
    if (n > UINT32_MAX / 2) return wisp_fail(err, WISP_ERR_CAPACITY, "training data larger than 2 GiB");
    size_t limit = piece_limit(opt);
    info->tok_scratch = wisp_tokenizer_scratch_bytes(tok, limit);
    if (opt->format == WISP_DATA_TEXT) {
        counter c = {0, 0};
        each_document(bytes, n, opt->docs, count_doc, &c, err);
        info->max_tokens = token_bound(c.bytes, limit) + 2 * c.docs + 2;
        info->max_examples = info->max_tokens / (size_t)opt->seq_len + 2;
        return WISP_OK;
    }
    size_t pos = 0, s, e, line = 0;
    while (next_line(bytes, n, pos, &s, &e)) {
        pos = e + 1;
        line++;
        if (blank(bytes + s, e - s)) continue;
        wisp_json j;
        size_t need = 0;
        wisp_error perr = {0};
        wisp_json_parse(&j, bytes + s, e - s, NULL, 0, &need, &perr);
        if (need == 0) return wisp_fail(err, WISP_ERR_FORMAT, "line %zu: %s", line, perr.message);
        if (need > info->json_nodes) info->json_nodes = need;
        /* the prompt (template included) and the response each get half */
        if (2 * (e - s + TEMPLATE_MAX) > info->text_bytes) info->text_bytes = 2 * (e - s + TEMPLATE_MAX);
        size_t text = e - s + TEMPLATE_MAX;
        if (chat) { /* or a conversation and its renderings */
            chat_layout c = chat_layout_of(e - s, need);
            if (c.total > info->text_bytes) info->text_bytes = c.total;
            text = c.render_cap;
        }
        info->max_tokens += token_bound(text, limit) + 4 + opt->packing; /* packing: and a separating EOS */
        info->n_records++;
    }
    info->max_examples = info->n_records;
    if (opt->packing) { /* windows of seq_len targets over all the ids */
        size_t windows = info->max_tokens / (size_t)opt->seq_len + 2;
        if (windows > info->max_examples) info->max_examples = windows;
    }
    return WISP_OK;
}

wisp_status wisp_data_plan(const wisp_tokenizer *tok, const char *bytes, size_t n, const wisp_data_options *opt,
                           wisp_data_plan_info *info, wisp_error *err) {
    return plan(tok, bytes, n, opt, NULL, info, err);
}

wisp_status wisp_data_plan_chat(const wisp_tokenizer *tok, const char *bytes, size_t n, const wisp_data_options *opt,
                                const wisp_data_chat *chat, wisp_data_plan_info *info, wisp_error *err) {
    if (!chat || !chat->tpl) return wisp_fail(err, WISP_ERR_ARG, "training data: conversations need a chat template");
    return plan(tok, bytes, n, opt, chat, info, err);
}

/* ---- building ---- */

typedef struct builder {
    wisp_train_data *d;
    wisp_tokenizer cont; /* the tokenizer without SentencePiece's leading space, for continued text */
} builder;

static wisp_status push(wisp_train_data *d, int32_t id, wisp_error *err) {
    if (d->n_tokens >= d->mem.cap_tokens)
        return wisp_fail(err, WISP_ERR_CAPACITY, "training data: more than the %zu planned tokens", d->mem.cap_tokens);
    d->mem.tokens[d->n_tokens++] = id;
    return WISP_OK;
}

/* Appends the ids of text[0..n); `continued`: the text follows other text. */
static wisp_status tokenize_text(builder *b, const char *text, size_t n, bool continued, wisp_error *err) {
    wisp_train_data *d = b->d;
    size_t limit = piece_limit(&d->opt);
    for (size_t done = 0; done < n;) {
        size_t len = piece_end(text + done, n - done, limit), got = 0;
        const wisp_tokenizer *t = continued || done ? &b->cont : d->tok;
        wisp_status s = wisp_tokenize(t, text + done, len, 0, d->mem.tokens + d->n_tokens, d->mem.cap_tokens - d->n_tokens,
                                      &got, d->mem.tok_scratch, d->mem.tok_scratch_bytes, err);
        if (s) return s;
        d->n_tokens += got;
        done += len;
    }
    return WISP_OK;
}

static wisp_status add_document(void *user, const char *text, size_t n, wisp_error *err) {
    builder *b = user;
    wisp_status s = tokenize_text(b, text, n, false, err);
    if (!s && b->d->eos >= 0) s = push(b->d, b->d->eos, err);
    return s;
}

static wisp_status add_example(wisp_train_data *d, size_t offset, size_t len, size_t n_prompt, bool bos, wisp_error *err) {
    if ((size_t)d->n_examples >= d->mem.cap_examples)
        return wisp_fail(err, WISP_ERR_CAPACITY, "training data: more than the %zu planned examples", d->mem.cap_examples);
    wisp_data_example *e = &d->mem.examples[d->n_examples++];
    e->offset = (uint32_t)offset, e->len = (uint32_t)len, e->n_prompt = (uint32_t)n_prompt, e->bos = bos;
    return WISP_OK;
}

static wisp_status build_text(builder *b, const char *bytes, size_t n, wisp_error *err) {
    wisp_train_data *d = b->d;
    wisp_status s = each_document(bytes, n, d->opt.docs, add_document, b, err);
    if (s) return s;
    size_t S = (size_t)d->opt.seq_len, N = d->n_tokens;
    if (d->bos >= 0) { /* BOS + the next S stream ids */
        for (size_t at = 0; at < N && !s; at += S) s = add_example(d, at, N - at < S ? N - at : S, 0, true, err);
    } else { /* S + 1 stream ids, the first of them only read */
        for (size_t at = 0; at + 1 < N && !s; at += S) s = add_example(d, at, N - at < S + 1 ? N - at : S + 1, 0, false, err);
    }
    return s;
}

/* Unescapes string `key` into buf (cap bytes, NUL included); false when it
 * is absent, not a string, or does not fit. */
static bool field(const wisp_json *j, const char *key, char *buf, size_t cap, size_t *len) {
    int64_t node = wisp_json_get(j, 0, key);
    if (node < 0 || !wisp_json_is(j, node, WISP_JSON_STRING)) return false;
    *len = wisp_json_string(j, node, buf, cap);
    return *len < cap;
}

static size_t append(char *dst, size_t at, size_t cap, const char *src, size_t n) {
    if (at + n <= cap) memcpy(dst + at, src, n);
    return at + n;
}

/* The prompt of an instruction record (Alpaca template) into t[0..cap). */
static bool alpaca_prompt(const wisp_json *j, char *t, size_t cap, size_t *plen) {
    int64_t in = wisp_json_get(j, 0, "input");
    if (in >= 0 && !wisp_json_is(j, in, WISP_JSON_STRING)) return false;
    bool with_input = in >= 0 && j->nodes[in].end > j->nodes[in].start;
    size_t n = append(t, 0, cap, ALPACA_HEAD, sizeof ALPACA_HEAD - 1), len;
    if (with_input) n = append(t, n, cap, ALPACA_WITH_INPUT, sizeof ALPACA_WITH_INPUT - 1);
    n = append(t, n, cap, ALPACA_TAIL, sizeof ALPACA_TAIL - 1);
    if (n >= cap || !field(j, "instruction", t + n, cap - n, &len)) return false;
    n += len;
    if (with_input) {
        n = append(t, n, cap, ALPACA_INPUT, sizeof ALPACA_INPUT - 1);
        if (n >= cap || !field(j, "input", t + n, cap - n, &len)) return false;
        n += len;
    }
    n = append(t, n, cap, ALPACA_RESPONSE, sizeof ALPACA_RESPONSE - 1);
    *plen = n;
    return n <= cap;
}

/* Counts a JSONL record's truncation and scored targets; false when nothing is left to score. */
static bool count_window(wisp_train_data *d, const wisp_data_example *e) {
    /* packed records are never cut: they continue in the next window */
    size_t width = d->opt.packing ? e->len : (size_t)d->opt.seq_len + 1, n = e->len < width ? e->len : width, scored = 0;
    if (e->len > width) d->n_truncated++;
    if (e->n_prompt == PER_TOKEN_MASK) {
        for (size_t i = 1; i < n; i++) scored += !(d->mem.tokens[e->offset + i] & UNSCORED_BIT);
    } else {
        /* a window's first id is never a target (packed: it would be predicted from the record before) */
        size_t skip = e->n_prompt == 0 ? 1 : e->n_prompt;
        scored = n > skip ? n - skip : 0;
    }
    d->n_scored += (int64_t)scored;
    if (scored == 0) d->n_unscored++;
    return scored > 0;
}

/* Appends the ids of full[a, b) (pieces of at most piece_limit bytes), with
 * special tokens parsed outside the messages' content; `unscored` marks them. */
static wisp_status tokenize_chat_range(builder *b, const char *full, size_t a, size_t e, const wisp_text_span *spans,
                                       size_t n_spans, wisp_text_span *piece_spans, bool unscored, wisp_error *err) {
    wisp_train_data *d = b->d;
    size_t limit = piece_limit(&d->opt);
    for (size_t at = a; at < e;) {
        size_t len = piece_end(full + at, e - at, limit), got = 0, k = 0;
        for (size_t i = 0; i < n_spans; i++) { /* the content inside this piece, relative to it */
            size_t lo = spans[i].start > at ? spans[i].start : at;
            size_t hi = spans[i].start + spans[i].len < at + len ? spans[i].start + spans[i].len : at + len;
            if (lo < hi) piece_spans[k].start = lo - at, piece_spans[k++].len = hi - lo;
        }
        const wisp_tokenizer *t = at > 0 ? &b->cont : d->tok; /* SentencePiece: no leading space inside the text */
        size_t first = d->n_tokens;
        wisp_status s = wisp_tokenize_literal(t, full + at, len, 0, piece_spans, k, d->mem.tokens + d->n_tokens,
                                              d->mem.cap_tokens - d->n_tokens, &got, d->mem.tok_scratch,
                                              d->mem.tok_scratch_bytes, err);
        if (s) return s;
        d->n_tokens += got;
        if (unscored)
            for (size_t i = first; i < d->n_tokens; i++) d->mem.tokens[i] |= UNSCORED_BIT;
        at += len;
    }
    return WISP_OK;
}

static wisp_status render(const wisp_data_chat *chat, const wisp_chat_message *m, size_t n, bool gen, char *out,
                          size_t cap, size_t *len, wisp_text_span *spans, size_t cap_spans, size_t *n_spans,
                          wisp_error *err) {
    wisp_template_vars v = {m, n, gen, chat->bos_token, chat->eos_token, chat->year, chat->month, chat->day, NULL, 0};
    return wisp_template_render_spans(chat->tpl, &v, out, cap, len, spans, cap_spans, n_spans, err);
}

/* The pieces of a conversation record, carved from the data's text buffer by its layout. */
typedef struct chat_buffers {
    chat_layout c;
    wisp_chat_message *msgs;
    wisp_text_span *spans, *turns, *piece_spans;
    char *text, *full, *prefix;
} chat_buffers;

static wisp_status chat_buffers_carve(const wisp_train_data *d, const wisp_json *j, size_t n_line, size_t line_no,
                                      chat_buffers *cb, wisp_error *err) {
    cb->c = chat_layout_of(n_line, j->n_nodes);
    char *base = d->mem.text + ((16 - (uintptr_t)d->mem.text % 16) % 16);
    if (!d->mem.text || base + cb->c.total - 16 > d->mem.text + d->mem.text_bytes)
        return wisp_fail(err, WISP_ERR_CAPACITY, "line %zu: the text buffer is smaller than planned for a conversation", line_no);
    cb->msgs = (wisp_chat_message *)(void *)(base + cb->c.msgs_at);
    cb->spans = (wisp_text_span *)(void *)(base + cb->c.spans_at);
    cb->turns = (wisp_text_span *)(void *)(base + cb->c.turns_at);
    cb->piece_spans = (wisp_text_span *)(void *)(base + cb->c.piece_spans_at);
    cb->text = base + cb->c.text_at;
    cb->full = base + cb->c.full_at;
    cb->prefix = base + cb->c.prefix_at;
    return WISP_OK;
}

/* A failed rendering of a record, with the line, and a rendering too long for its buffer said in
 * the record's terms. */
static wisp_status chat_render_failed(wisp_status s, const chat_layout *c, size_t line_no, wisp_error *err) {
    if (s == WISP_ERR_CAPACITY && strstr(err->message, "rendered text"))
        s = wisp_fail(err, WISP_ERR_CAPACITY, "the conversation renders to more than %zu bytes", c->render_cap);
    return wisp_error_prefix(err, "line %zu", line_no);
}

/* BOS as the model wants it, unless the template wrote it at the start of the rendering. */
static wisp_status push_bos_unless_rendered(wisp_train_data *d, const char *full, size_t len, wisp_error *err) {
    if (d->bos < 0) return WISP_OK;
    wisp_str bt = wisp_token_text(d->tok, d->bos);
    if (len >= bt.len && memcmp(full, bt.ptr, bt.len) == 0) return WISP_OK;
    return push(d, d->bos | UNSCORED_BIT, err);
}

/* A conversation: rendered whole, then each assistant turn located as the
 * text between the rendering of the messages before it (with the generation
 * prompt) and the rendering that includes it. */
static wisp_status build_chat_record(builder *b, const wisp_json *j, size_t n_line, size_t line_no, wisp_error *err) {
    wisp_train_data *d = b->d;
    const wisp_data_chat *chat = d->chat;
    chat_buffers cb;
    wisp_status s = chat_buffers_carve(d, j, n_line, line_no, &cb, err);
    if (s) return s;
    const chat_layout c = cb.c;
    wisp_chat_message *msgs = cb.msgs;
    wisp_text_span *spans = cb.spans, *turns = cb.turns, *piece_spans = cb.piece_spans;
    char *full = cb.full, *prefix = cb.prefix;
    size_t n_msgs = 0, full_len = 0, n_spans = 0, n_turns = 0, unused = 0;
    s = wisp_chat_messages_from_json(j, wisp_json_get(j, 0, "messages"), msgs, c.cap_msgs, &n_msgs, cb.text, n_line + 1, err);
    if (!s && n_msgs == 0) s = wisp_fail(err, WISP_ERR_FORMAT, "no messages");
    if (!s) s = render(chat, msgs, n_msgs, false, full, c.render_cap, &full_len, spans, c.cap_spans, &n_spans, err);
    for (size_t i = 0; !s && i < n_msgs; i++) {
        if (msgs[i].role_len != 9 || memcmp(msgs[i].role, "assistant", 9) != 0) continue;
        size_t start = 0, end = 0;
        s = render(chat, msgs, i, true, prefix, c.render_cap, &start, NULL, 0, &unused, err);
        if (!s && !(start <= full_len && memcmp(prefix, full, start) == 0))
            s = wisp_fail(err, WISP_ERR_UNSUPPORTED, "the chat template does not render the messages before assistant turn "
                          "%zu as the start of the conversation: assistant-only loss needs that", i);
        if (!s) s = render(chat, msgs, i + 1, false, prefix, c.render_cap, &end, NULL, 0, &unused, err);
        if (!s && !(end <= full_len && end >= start && memcmp(prefix, full, end) == 0 &&
                    (n_turns == 0 || start >= turns[n_turns - 1].start + turns[n_turns - 1].len)))
            s = wisp_fail(err, WISP_ERR_UNSUPPORTED, "the chat template does not render assistant turn %zu as a piece of "
                          "the conversation: assistant-only loss needs that", i);
        if (!s) turns[n_turns].start = start, turns[n_turns++].len = end - start;
    }
    if (s) return chat_render_failed(s, &c, line_no, err);
    if (n_turns == 0) return wisp_fail(err, WISP_ERR_FORMAT, "line %zu: the conversation has no assistant message to learn", line_no);
    size_t first = d->n_tokens;
    if ((s = push_bos_unless_rendered(d, full, full_len, err))) return s;
    size_t at = 0;
    for (size_t t = 0; t < n_turns && !s; t++) {
        s = tokenize_chat_range(b, full, at, turns[t].start, spans, n_spans, piece_spans, true, err);
        if (!s) s = tokenize_chat_range(b, full, turns[t].start, turns[t].start + turns[t].len, spans, n_spans, piece_spans, false, err);
        at = turns[t].start + turns[t].len;
    }
    if (!s) s = tokenize_chat_range(b, full, at, full_len, spans, n_spans, piece_spans, true, err);
    if (s) return wisp_error_prefix(err, "line %zu", line_no);
    if (d->n_tokens > first) d->mem.tokens[first] |= UNSCORED_BIT; /* nothing predicts the first id */
    /* packed: EOS between this record and the next, unless the template ended it with EOS (not scored: the
     * turn's own end marker is) */
    if (d->opt.packing && d->eos >= 0 && d->n_tokens > first && (d->mem.tokens[d->n_tokens - 1] & ~UNSCORED_BIT) != d->eos &&
        (s = push(d, d->eos | UNSCORED_BIT, err)))
        return s;
    if ((s = add_example(d, first, d->n_tokens - first, PER_TOKEN_MASK, false, err))) return s;
    if (!count_window(d, &d->mem.examples[d->n_examples - 1])) { /* cut away entirely: dropped, and counted */
        d->n_examples--;
        d->n_dropped++;
        d->n_tokens = first;
    }
    return WISP_OK;
}

/* Longest common prefix of a[0..na) and b[0..nb). */
static size_t common_prefix(const char *a, size_t na, const char *b, size_t nb) {
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

/* A conversational prompt/completion record: {"prompt": [messages],
 * "completion": [messages]} and, for a DPO answer, "paired_completion" (the
 * pair's other answer). Rendered as trl's maybe_apply_chat_template does: the
 * prompt with the generation prompt (so its last message must be the
 * user's), prompt + completion (and prompt + paired completion) without it;
 * the prompt is then cut to the longest prefix it shares with each of those
 * renderings, and the completion is the rest of prompt + completion. The
 * completion and an EOS after it are scored (trl's DPO appends EOS to each
 * answer); BOS comes first unless the template wrote it. Cut records are
 * counted and kept, as prompt/completion strings are, so DPO's two sides stay
 * in lockstep. */
static wisp_status build_chat_completion_record(builder *b, const wisp_json *j, size_t n_line, size_t line_no,
                                                wisp_error *err) {
    static const char *const names[3] = {"prompt", "completion", "paired_completion"};
    wisp_train_data *d = b->d;
    chat_buffers cb;
    wisp_status s = chat_buffers_carve(d, j, n_line, line_no, &cb, err);
    if (s) return s;
    const chat_layout c = cb.c;
    wisp_chat_message *msgs = cb.msgs;
    wisp_text_span *spans = cb.spans, *piece_spans = cb.piece_spans;
    char *text = cb.text, *full = cb.full, *prompt = cb.prefix;
    int64_t node[3] = {-1, -1, -1};
    char name[64];
    if (!wisp_json_pick(j, 0, names, 3, node, name, sizeof name))
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "line %zu: key \"%s\": a conversational prompt/completion record "
                         "has \"prompt\", \"completion\" and (a DPO answer) \"paired_completion\"", line_no, name);
    for (int k = 0; k < 3; k++)
        if (node[k] >= 0 && !wisp_json_is(j, node[k], WISP_JSON_ARRAY))
            return wisp_fail(err, WISP_ERR_FORMAT, "line %zu: \"%s\" must be a list of messages, as \"prompt\" is", line_no,
                             names[k]);
    if (node[1] < 0) return wisp_fail(err, WISP_ERR_FORMAT, "line %zu: a conversational prompt needs a \"completion\"", line_no);
    /* the prompt's strings first in the text buffer, then one answer's at a time after them */
    size_t np = 0, na = 0, plen = 0, flen = 0, n_spans = 0, unused = 0;
    size_t after_prompt = j->nodes[node[0]].end - j->nodes[node[0]].start + 1;
    s = wisp_chat_messages_from_json(j, node[0], msgs, c.cap_msgs, &np, text, after_prompt, err);
    if (!s && np == 0) s = wisp_fail(err, WISP_ERR_FORMAT, "the prompt has no messages");
    if (!s && !(msgs[np - 1].role_len == 4 && memcmp(msgs[np - 1].role, "user", 4) == 0))
        s = wisp_fail(err, WISP_ERR_UNSUPPORTED, "the prompt's last message is the %.*s's: a prompt ends with the user's "
                      "message (trl's continuation of a final assistant message is not implemented)",
                      (int)msgs[np - 1].role_len, msgs[np - 1].role);
    if (!s) s = render(d->chat, msgs, np, true, prompt, c.render_cap, &plen, NULL, 0, &unused, err);
    size_t keep = plen; /* of the prompt's rendering, what every rendering with an answer starts with */
    for (int k = 2; k >= 1 && !s; k--) { /* the paired answer first: the completion's rendering stays in `full` */
        if (node[k] < 0) continue;
        s = wisp_chat_messages_from_json(j, node[k], msgs + np, c.cap_msgs - np, &na, text + after_prompt,
                                         n_line + 1 - after_prompt, err);
        if (!s && na == 0) s = wisp_fail(err, WISP_ERR_FORMAT, "\"%s\" has no messages", names[k]);
        if (!s) s = render(d->chat, msgs, np + na, false, full, c.render_cap, &flen, k == 1 ? spans : NULL,
                           k == 1 ? c.cap_spans : 0, k == 1 ? &n_spans : &unused, err);
        if (!s) {
            size_t shared = common_prefix(prompt, plen, full, flen);
            if (shared < keep) keep = shared;
        }
    }
    if (s) return chat_render_failed(s, &c, line_no, err);
    size_t first = d->n_tokens;
    if ((s = push_bos_unless_rendered(d, full, flen, err))) return s;
    s = tokenize_chat_range(b, full, 0, keep, spans, n_spans, piece_spans, true, err);
    if (!s) s = tokenize_chat_range(b, full, keep, flen, spans, n_spans, piece_spans, false, err);
    if (!s && d->eos >= 0) s = push(d, d->eos, err);
    if (s) return wisp_error_prefix(err, "line %zu", line_no);
    if (d->n_tokens > first) d->mem.tokens[first] |= UNSCORED_BIT; /* nothing predicts the first id */
    if ((s = add_example(d, first, d->n_tokens - first, PER_TOKEN_MASK, false, err))) return s;
    count_window(d, &d->mem.examples[d->n_examples - 1]);
    return WISP_OK;
}

static wisp_status build_record(builder *b, const char *line, size_t n, size_t line_no, wisp_error *err) {
    wisp_train_data *d = b->d;
    wisp_json j;
    wisp_status s = wisp_json_parse(&j, line, n, d->mem.nodes, d->mem.cap_nodes, NULL, err);
    if (s) return wisp_error_prefix(err, "line %zu", line_no);
    if (!wisp_json_is(&j, 0, WISP_JSON_OBJECT)) return wisp_fail(err, WISP_ERR_FORMAT, "line %zu: not a JSON object", line_no);
    int64_t pr = wisp_json_get(&j, 0, "prompt");
    if (pr >= 0 && wisp_json_is(&j, pr, WISP_JSON_ARRAY)) {
        if (!d->chat)
            return wisp_fail(err, WISP_ERR_UNSUPPORTED, "line %zu: a conversational prompt (a list of messages) needs a "
                             "chat template (the model's, or --chat-template)", line_no);
        return build_chat_completion_record(b, &j, n, line_no, err);
    }
    if (wisp_json_get(&j, 0, "messages") >= 0) {
        if (!d->chat)
            return wisp_fail(err, WISP_ERR_UNSUPPORTED, "line %zu: a conversation (\"messages\") needs a chat template "
                             "(the model's, or --chat-template)", line_no);
        return build_chat_record(b, &j, n, line_no, err);
    }
    /* the prompt goes in the first half of the text buffer, the response in the second */
    size_t half = d->mem.text_bytes / 2, plen = 0, rlen = 0;
    char *prompt = d->mem.text, *resp = d->mem.text + half;
    bool alpaca = wisp_json_get(&j, 0, "instruction") >= 0;
    bool ok = alpaca ? alpaca_prompt(&j, prompt, half, &plen) && field(&j, "output", resp, half, &rlen)
                     : field(&j, "prompt", prompt, half, &plen) && field(&j, "completion", resp, half, &rlen);
    if (!ok)
        return wisp_fail(err, WISP_ERR_FORMAT,
                         "line %zu: expected {\"prompt\": string, \"completion\": string} or "
                         "{\"instruction\": string, \"input\": string (optional), \"output\": string}",
                         line_no);
    size_t start = d->n_tokens;
    if (d->bos >= 0 && (s = push(d, d->bos, err))) return s;
    if ((s = tokenize_text(b, prompt, plen, false, err))) return s;
    size_t n_prompt = d->n_tokens - start;
    if ((s = tokenize_text(b, resp, rlen, plen > 0, err))) return s;
    if (d->eos >= 0 && (s = push(d, d->eos, err))) return s;
    if ((s = add_example(d, start, d->n_tokens - start, n_prompt, false, err))) return s;
    count_window(d, &d->mem.examples[d->n_examples - 1]); /* kept as before, but counted */
    return WISP_OK;
}

static wisp_status build_jsonl(builder *b, const char *bytes, size_t n, wisp_error *err) {
    size_t pos = 0, s, e, line = 0;
    while (next_line(bytes, n, pos, &s, &e)) {
        pos = e + 1;
        line++;
        if (blank(bytes + s, e - s)) continue;
        wisp_status st = build_record(b, bytes + s, e - s, line, err);
        if (st) return st;
    }
    return WISP_OK;
}

/* Packing (train_data.h): the kept records, back to back in the token array,
 * become one stream with a mask per id; then the examples are rewritten as
 * windows over it. */
static wisp_status pack_records(wisp_train_data *d, wisp_error *err) {
    if (wisp_tokenizer_n_vocab(d->tok) >= UNSCORED_BIT) return wisp_fail(err, WISP_ERR_UNSUPPORTED, "packing: vocabulary too large");
    int32_t n_records = d->n_examples;
    if (n_records > 0) {
        const wisp_data_example *last = &d->mem.examples[n_records - 1];
        if (d->mem.examples[0].offset != 0 || (size_t)last->offset + last->len != d->n_tokens)
            return wisp_fail(err, WISP_ERR_INTERNAL, "packing: the records are not back to back");
    }
    for (int32_t r = 0; r < n_records; r++) {
        const wisp_data_example *e = &d->mem.examples[r];
        int32_t *ids = d->mem.tokens + e->offset;
        if (e->n_prompt != PER_TOKEN_MASK)
            for (uint32_t i = 0; i < e->n_prompt && i < e->len; i++) ids[i] |= UNSCORED_BIT;
        if (e->len > 0) ids[0] |= UNSCORED_BIT; /* no target is predicted from the record before */
    }
    d->n_scored = 0;
    for (size_t i = 0; i < d->n_tokens; i++) d->n_scored += !(d->mem.tokens[i] & UNSCORED_BIT);
    d->n_records = n_records;
    d->n_examples = 0;
    size_t S = (size_t)d->opt.seq_len, N = d->n_tokens;
    wisp_status s = WISP_OK;
    for (size_t at = 0; at + 1 < N && !s; at += S) s = add_example(d, at, N - at < S + 1 ? N - at : S + 1, PER_TOKEN_MASK, false, err);
    return s;
}

static wisp_status build(wisp_train_data *d, const wisp_tokenizer *tok, const char *bytes, size_t n,
                         const wisp_data_options *opt, const wisp_data_memory *mem, const wisp_data_chat *chat,
                         wisp_error *err) {
    memset(d, 0, sizeof *d);
    d->chat = chat;
    d->opt = *opt;
    d->mem = *mem;
    d->tok = tok;
    d->bos = wisp_tokenizer_add_bos_default(tok) ? wisp_tokenizer_bos(tok) : -1;
    d->eos = wisp_tokenizer_eos(tok);
    d->pad = d->eos >= 0 ? d->eos : 0;
    d->order_epoch = -1;
    if (opt->seq_len < 1) return wisp_fail(err, WISP_ERR_ARG, "training data: seq_len must be positive");
    if (opt->packing && opt->format != WISP_DATA_JSONL)
        return wisp_fail(err, WISP_ERR_ARG, "packing is for JSONL records (plain text is always packed into full windows)");
    builder b = {d, *tok};
    b.cont.add_space_prefix = false;
    wisp_status s = opt->format == WISP_DATA_TEXT ? build_text(&b, bytes, n, err) : build_jsonl(&b, bytes, n, err);
    if (!s && opt->packing) s = pack_records(d, err);
    if (s) return s;
    if (!opt->packing) d->n_records = d->n_examples;
    if (d->n_examples == 0 && d->n_unscored > 0)
        return wisp_fail(err, WISP_ERR_ARG, "all %d records were cut to %d tokens before anything to score (raise the "
                         "sequence length)", d->n_unscored, opt->seq_len + 1);
    if (d->n_examples == 0) return wisp_fail(err, WISP_ERR_ARG, "no training examples in the data (empty, or all blank)");
    if (opt->val_split > 0) {
        double want = (double)opt->val_split * d->n_examples;
        d->n_val = (int32_t)want + ((double)(int32_t)want < want);
        if (d->n_val >= d->n_examples)
            return wisp_fail(err, WISP_ERR_ARG, "only %d examples: holding out %g of them leaves none to train on",
                             d->n_examples, (double)opt->val_split);
    }
    d->n_train = d->n_examples - d->n_val;
    return WISP_OK;
}

wisp_status wisp_data_build(wisp_train_data *d, const wisp_tokenizer *tok, const char *bytes, size_t n,
                            const wisp_data_options *opt, const wisp_data_memory *mem, wisp_error *err) {
    return build(d, tok, bytes, n, opt, mem, NULL, err);
}

wisp_status wisp_data_build_chat(wisp_train_data *d, const wisp_tokenizer *tok, const char *bytes, size_t n,
                                 const wisp_data_options *opt, const wisp_data_memory *mem, const wisp_data_chat *chat,
                                 wisp_error *err) {
    if (!chat || !chat->tpl) return wisp_fail(err, WISP_ERR_ARG, "training data: conversations need a chat template");
    if (wisp_tokenizer_n_vocab(tok) >= UNSCORED_BIT) return wisp_fail(err, WISP_ERR_UNSUPPORTED, "vocabulary too large");
    return build(d, tok, bytes, n, opt, mem, chat, err);
}

int32_t wisp_data_count(const wisp_train_data *d, wisp_data_split split) {
    return split == WISP_SPLIT_TRAIN ? d->n_train : d->n_val;
}

void wisp_data_get(const wisp_train_data *d, wisp_data_split split, int32_t index, int32_t *ids, uint8_t *mask) {
    const wisp_data_example *e = &d->mem.examples[split == WISP_SPLIT_TRAIN ? index : d->n_train + index];
    size_t width = (size_t)d->opt.seq_len + 1, j = 0;
    if (e->bos) ids[j] = d->bos, mask[j++] = 0;
    size_t n = e->len < width - j ? e->len : width - j;
    for (size_t i = 0; i < n; i++, j++) {
        int32_t t = d->mem.tokens[e->offset + i];
        if (e->n_prompt == PER_TOKEN_MASK) {
            ids[j] = t & ~UNSCORED_BIT;
            mask[j] = !(t & UNSCORED_BIT);
        } else {
            ids[j] = t;
            mask[j] = i >= e->n_prompt;
        }
    }
    for (; j < width; j++) ids[j] = d->pad, mask[j] = 0;
}

/* Epoch e's permutation of the training examples (Fisher-Yates on a stream from (seed, e)). */
static void shuffle(wisp_train_data *d, int64_t epoch) {
    int32_t n = d->n_train, *o = d->mem.order;
    for (int32_t i = 0; i < n; i++) o[i] = i;
    uint64_t key = wisp_hash2(d->opt.seed ^ 0x5eed, (uint64_t)epoch);
    for (int32_t i = n - 1; i > 0; i--) {
        int32_t j = (int32_t)(wisp_hash2(key, (uint64_t)i) % (uint64_t)(i + 1)), tmp = o[i];
        o[i] = o[j];
        o[j] = tmp;
    }
    d->order_epoch = epoch;
}

void wisp_data_next_indexed(wisp_train_data *d, int32_t n, int32_t *ids, uint8_t *mask, int32_t *index) {
    size_t width = (size_t)d->opt.seq_len + 1;
    for (int32_t i = 0; i < n; i++) {
        if (d->pos >= d->n_train) d->epoch++, d->pos = 0;
        if (d->order_epoch != d->epoch) shuffle(d, d->epoch);
        int32_t k = d->mem.order[d->pos++];
        if (index) index[i] = k;
        wisp_data_get(d, WISP_SPLIT_TRAIN, k, ids + i * width, mask + i * width);
    }
}

void wisp_data_next(wisp_train_data *d, int32_t n, int32_t *ids, uint8_t *mask) {
    wisp_data_next_indexed(d, n, ids, mask, NULL);
}

int64_t wisp_data_consumed(const wisp_train_data *d) { return d->epoch * d->n_train + d->pos; }

wisp_data_cursor wisp_data_cursor_get(const wisp_train_data *d) {
    wisp_data_cursor c = {d->epoch, d->pos};
    return c;
}

wisp_status wisp_data_cursor_set(wisp_train_data *d, wisp_data_cursor c, wisp_error *err) {
    if (c.epoch < 0 || c.pos < 0 || c.pos > d->n_train)
        return wisp_fail(err, WISP_ERR_ARG, "data cursor (epoch %lld, position %d) does not fit %d training examples",
                         (long long)c.epoch, c.pos, d->n_train);
    d->epoch = c.epoch;
    d->pos = c.pos;
    return WISP_OK;
}
