/* Plain text and JSONL into token windows and loss masks (train_data.h). */
#include "train_data.h"

#include <string.h>

#include "train_rng.h"

#define DEFAULT_PIECE 4096
#define TEMPLATE_MAX 512 /* bytes the Alpaca template adds around a record's fields */

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

wisp_status wisp_data_plan(const wisp_tokenizer *tok, const char *bytes, size_t n, const wisp_data_options *opt,
                           wisp_data_plan_info *info, wisp_error *err) {
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
        info->max_tokens += token_bound(e - s + TEMPLATE_MAX, limit) + 4;
        info->n_records++;
    }
    info->max_examples = info->n_records;
    return WISP_OK;
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

static wisp_status build_record(builder *b, const char *line, size_t n, size_t line_no, wisp_error *err) {
    wisp_train_data *d = b->d;
    wisp_json j;
    wisp_status s = wisp_json_parse(&j, line, n, d->mem.nodes, d->mem.cap_nodes, NULL, err);
    if (s) return wisp_error_prefix(err, "line %zu", line_no);
    if (!wisp_json_is(&j, 0, WISP_JSON_OBJECT)) return wisp_fail(err, WISP_ERR_FORMAT, "line %zu: not a JSON object", line_no);
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
    return add_example(d, start, d->n_tokens - start, n_prompt, false, err);
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

wisp_status wisp_data_build(wisp_train_data *d, const wisp_tokenizer *tok, const char *bytes, size_t n,
                            const wisp_data_options *opt, const wisp_data_memory *mem, wisp_error *err) {
    memset(d, 0, sizeof *d);
    d->opt = *opt;
    d->mem = *mem;
    d->tok = tok;
    d->bos = wisp_tokenizer_add_bos_default(tok) ? wisp_tokenizer_bos(tok) : -1;
    d->eos = wisp_tokenizer_eos(tok);
    d->pad = d->eos >= 0 ? d->eos : 0;
    d->order_epoch = -1;
    if (opt->seq_len < 1) return wisp_fail(err, WISP_ERR_ARG, "training data: seq_len must be positive");
    builder b = {d, *tok};
    b.cont.add_space_prefix = false;
    wisp_status s = opt->format == WISP_DATA_TEXT ? build_text(&b, bytes, n, err) : build_jsonl(&b, bytes, n, err);
    if (s) return s;
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

int32_t wisp_data_count(const wisp_train_data *d, wisp_data_split split) {
    return split == WISP_SPLIT_TRAIN ? d->n_train : d->n_val;
}

void wisp_data_get(const wisp_train_data *d, wisp_data_split split, int32_t index, int32_t *ids, uint8_t *mask) {
    const wisp_data_example *e = &d->mem.examples[split == WISP_SPLIT_TRAIN ? index : d->n_train + index];
    size_t width = (size_t)d->opt.seq_len + 1, j = 0;
    if (e->bos) ids[j] = d->bos, mask[j++] = 0;
    size_t n = e->len < width - j ? e->len : width - j;
    for (size_t i = 0; i < n; i++, j++) {
        ids[j] = d->mem.tokens[e->offset + i];
        mask[j] = i >= e->n_prompt;
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

void wisp_data_next(wisp_train_data *d, int32_t n, int32_t *ids, uint8_t *mask) {
    size_t width = (size_t)d->opt.seq_len + 1;
    for (int32_t i = 0; i < n; i++) {
        if (d->pos >= d->n_train) d->epoch++, d->pos = 0;
        if (d->order_epoch != d->epoch) shuffle(d, d->epoch);
        wisp_data_get(d, WISP_SPLIT_TRAIN, d->mem.order[d->pos++], ids + i * width, mask + i * width);
    }
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
