#include "llama2c.h"

#include <string.h>

#include "gguf_write.h"
#include "half.h"
#include "types.h"

wisp_status wisp_llama2c_open(wisp_llama2c *m, const void *bytes, size_t size, wisp_error *err) {
    memset(m, 0, sizeof *m);
    const uint8_t *b = bytes;
    if (size < 28) return wisp_fail(err, WISP_ERR_FORMAT, "truncated: a llama2.c checkpoint starts with a 28-byte header");
    int32_t h[7];
    for (int i = 0; i < 7; i++) h[i] = (int32_t)wisp_load_u32(b + 4 * i);
    m->dim = h[0];
    m->hidden_dim = h[1];
    m->n_layers = h[2];
    m->n_heads = h[3];
    m->n_kv_heads = h[4];
    m->shared_classifier = h[5] > 0;
    m->vocab_size = h[5] > 0 ? h[5] : (h[5] == INT32_MIN ? 0 : -h[5]);
    m->seq_len = h[6];
    if (m->dim < 1 || m->dim > 65536 || m->hidden_dim < 1 || m->hidden_dim > 1 << 20 || m->n_layers < 1 ||
        m->n_layers > 1024 || m->n_heads < 1 || m->n_heads > m->dim || m->dim % m->n_heads || m->n_kv_heads < 1 ||
        m->n_kv_heads > m->n_heads || m->n_heads % m->n_kv_heads || m->vocab_size < 1 || m->vocab_size > 1 << 22 ||
        m->seq_len < 1 || (m->dim / m->n_heads) % 2)
        return wisp_fail(err, WISP_ERR_FORMAT,
                         "not a llama2.c checkpoint: implausible header (dim %d, hidden %d, layers %d, heads %d/%d, "
                         "vocab %d, seq_len %d)",
                         h[0], h[1], h[2], h[3], h[4], h[5], h[6]);
    uint64_t dim = (uint64_t)m->dim, L = (uint64_t)m->n_layers, hid = (uint64_t)m->hidden_dim;
    uint64_t head = dim / (uint64_t)m->n_heads, kv_dim = head * (uint64_t)m->n_kv_heads;
    uint64_t off = 28;
    m->off_embedding = off; off += (uint64_t)m->vocab_size * dim * 4;
    m->off_rms_att = off;   off += L * dim * 4;
    m->off_wq = off;        off += L * dim * dim * 4;
    m->off_wk = off;        off += L * dim * kv_dim * 4;
    m->off_wv = off;        off += L * dim * kv_dim * 4;
    m->off_wo = off;        off += L * dim * dim * 4;
    m->off_rms_ffn = off;   off += L * dim * 4;
    m->off_w1 = off;        off += L * hid * dim * 4;
    m->off_w2 = off;        off += L * dim * hid * 4;
    m->off_w3 = off;        off += L * hid * dim * 4;
    m->off_rms_final = off; off += dim * 4;
    off += 2 * (uint64_t)m->seq_len * (head / 2) * 4; /* legacy RoPE tables, unused */
    m->off_classifier = m->shared_classifier ? m->off_embedding : off;
    if (!m->shared_classifier) off += (uint64_t)m->vocab_size * dim * 4;
    if (off != size)
        return wisp_fail(err, WISP_ERR_FORMAT, "llama2.c checkpoint should be %llu bytes for its header, but is %zu",
                         (unsigned long long)off, size);
    m->bytes = b;
    m->size = size;
    return WISP_OK;
}

/* Walk a tokenizer file: int32 max_len, then per token f32 score, int32 len, bytes. */
typedef struct tok_cursor {
    const uint8_t *b;
    size_t size, pos;
} tok_cursor;

static bool next_token(tok_cursor *c, float *score, const uint8_t **text, uint32_t *len) {
    if (c->size - c->pos < 8) return false;
    *score = wisp_load_f32(c->b + c->pos);
    int32_t n = (int32_t)wisp_load_u32(c->b + c->pos + 4);
    if (n < 0 || (size_t)n > c->size - c->pos - 8) return false;
    *text = c->b + c->pos + 8;
    *len = (uint32_t)n;
    c->pos += 8 + (size_t)n;
    return true;
}

wisp_status wisp_llama2c_check_tokenizer(const void *bytes, size_t size, int32_t vocab_size, wisp_error *err) {
    if (size < 4) return wisp_fail(err, WISP_ERR_FORMAT, "truncated llama2.c tokenizer");
    tok_cursor c = {bytes, size, 4};
    int32_t max_len = (int32_t)wisp_load_u32(bytes);
    float score;
    const uint8_t *text;
    uint32_t len;
    for (int32_t i = 0; i < vocab_size; i++) {
        if (!next_token(&c, &score, &text, &len))
            return wisp_fail(err, WISP_ERR_FORMAT, "llama2.c tokenizer ends at token %d of %d", i, vocab_size);
        if ((int32_t)len > max_len || len > 1024)
            return wisp_fail(err, WISP_ERR_FORMAT, "llama2.c tokenizer: token %d is longer (%u) than max_token_length %d",
                             i, len, max_len);
        if (score != score) return wisp_fail(err, WISP_ERR_FORMAT, "llama2.c tokenizer: token %d has a NaN score", i);
    }
    if (c.pos != size)
        return wisp_fail(err, WISP_ERR_FORMAT, "llama2.c tokenizer has %zu bytes after its %d tokens (wrong model?)",
                         size - c.pos, vocab_size);
    return WISP_OK;
}

/* llama2.c exports spaces as ' ' and wraps BOS/EOS in newlines; GGUF's
 * SentencePiece vocabulary spells them U+2581 and <s>, </s>. */
typedef struct vocab_walk {
    tok_cursor c;
    char buf[3 * 1024 + 8];
} vocab_walk;

static wisp_str unwrap_special(const uint8_t *t, uint32_t len) {
    wisp_str s = {(const char *)t, len};
    if (len >= 2 && t[0] == '\n' && t[len - 1] == '\n') { s.ptr++; s.len -= 2; }
    return s;
}

static wisp_str gguf_token_text(void *user, uint64_t i) {
    vocab_walk *w = user;
    float score;
    const uint8_t *t;
    uint32_t len;
    (void)i;
    next_token(&w->c, &score, &t, &len); /* validated beforehand */
    wisp_str raw = unwrap_special(t, len);
    size_t n = 0;
    for (uint64_t k = 0; k < raw.len; k++) {
        if (raw.ptr[k] == ' ') { memcpy(w->buf + n, "\xe2\x96\x81", 3); n += 3; }
        else w->buf[n++] = raw.ptr[k];
    }
    wisp_str s = {w->buf, n};
    return s;
}

static int32_t token_type(int32_t id, wisp_str s) {
    if (id == 0) return 2;                                      /* unknown */
    if (wisp_str_eq(s, "<s>") || wisp_str_eq(s, "</s>")) return 3; /* control */
    if (s.len == 6 && memcmp(s.ptr, "<0x", 3) == 0 && s.ptr[5] == '>') return 6; /* byte */
    return 1;
}

typedef struct tensor_src {
    wisp_gguf_out_tensor t;
    size_t offset; /* in the checkpoint */
} tensor_src;

wisp_status wisp_llama2c_to_gguf(const wisp_llama2c *m, const void *tok_bytes, size_t tok_size, const char *name,
                                 wisp_sink *sink, wisp_error *err) {
    wisp_status st;
    if ((st = wisp_llama2c_check_tokenizer(tok_bytes, tok_size, m->vocab_size, err))) return st;
    int64_t dim = m->dim, hid = m->hidden_dim, head = m->dim / m->n_heads, kv = head * m->n_kv_heads;
    const int n_global = m->shared_classifier ? 2 : 3, per_layer = 9;
    uint64_t n_tensors = (uint64_t)n_global + (uint64_t)per_layer * (uint64_t)m->n_layers;
    enum { N_KV = 17 }; /* the pairs written below, in order */
    if ((st = wisp_gguf_write_header(sink, n_tensors, N_KV, err))) return st;
    if ((st = wisp_gguf_write_kv_str(sink, "general.architecture", "llama", err))) return st;
    if ((st = wisp_gguf_write_kv_str(sink, "general.name", name, err))) return st;
    if ((st = wisp_gguf_write_kv_u32(sink, "llama.context_length", (uint32_t)m->seq_len, err))) return st;
    if ((st = wisp_gguf_write_kv_u32(sink, "llama.embedding_length", (uint32_t)dim, err))) return st;
    if ((st = wisp_gguf_write_kv_u32(sink, "llama.feed_forward_length", (uint32_t)hid, err))) return st;
    if ((st = wisp_gguf_write_kv_u32(sink, "llama.block_count", (uint32_t)m->n_layers, err))) return st;
    if ((st = wisp_gguf_write_kv_u32(sink, "llama.attention.head_count", (uint32_t)m->n_heads, err))) return st;
    if ((st = wisp_gguf_write_kv_u32(sink, "llama.attention.head_count_kv", (uint32_t)m->n_kv_heads, err))) return st;
    if ((st = wisp_gguf_write_kv_u32(sink, "llama.rope.dimension_count", (uint32_t)head, err))) return st;
    if ((st = wisp_gguf_write_kv_f32(sink, "llama.attention.layer_norm_rms_epsilon", 1e-5f, err))) return st;
    if ((st = wisp_gguf_write_kv_str(sink, "tokenizer.ggml.model", "llama", err))) return st;
    vocab_walk walk = {{tok_bytes, tok_size, 4}, {0}};
    if ((st = wisp_gguf_write_kv_str_array(sink, "tokenizer.ggml.tokens", (uint64_t)m->vocab_size, gguf_token_text,
                                           &walk, err)))
        return st;
    /* scores and types: stream them in chunks so no vocab-sized buffer is needed */
    for (int pass = 0; pass < 2; pass++) {
        const char *key = pass == 0 ? "tokenizer.ggml.scores" : "tokenizer.ggml.token_type";
        uint32_t elem = pass == 0 ? WISP_GGUF_F32 : WISP_GGUF_I32;
        if ((st = wisp_gguf_write_kv_array_begin(sink, key, elem, (uint64_t)m->vocab_size, err))) return st;
        tok_cursor c = {tok_bytes, tok_size, 4};
        for (int32_t i = 0; i < m->vocab_size; i++) {
            float score;
            const uint8_t *t;
            uint32_t len;
            next_token(&c, &score, &t, &len);
            uint8_t v[4];
            if (pass == 0) wisp_store_f32(v, score);
            else wisp_store_u32(v, (uint32_t)token_type(i, unwrap_special(t, len)));
            if ((st = wisp_sink_write(sink, v, 4, err))) return st;
        }
    }
    if ((st = wisp_gguf_write_kv_u32(sink, "tokenizer.ggml.bos_token_id", 1, err))) return st;
    if ((st = wisp_gguf_write_kv_u32(sink, "tokenizer.ggml.eos_token_id", 2, err))) return st;
    if ((st = wisp_gguf_write_kv_u32(sink, "tokenizer.ggml.unknown_token_id", 0, err))) return st;

    /* Tensors in file order: all infos (pass 0), then all data (pass 1), both
     * walking the same per-layer list so offsets line up. */
    char names[9][48];
    tensor_src list[3 + 9];
    uint64_t written_infos = 0;
    /* first pass writes the infos, second pass the data, in the same order */
    for (int pass = 0; pass < 2; pass++) {
        uint64_t offset = 0;
        for (int64_t l = -1; l < m->n_layers; l++) {
            int n = 0;
            if (l < 0) {
                list[n++] = (tensor_src){{"token_embd.weight", 2, {dim, m->vocab_size, 1, 1}, WISP_TYPE_F32}, m->off_embedding};
                list[n++] = (tensor_src){{"output_norm.weight", 1, {dim, 1, 1, 1}, WISP_TYPE_F32}, m->off_rms_final};
                if (!m->shared_classifier)
                    list[n++] = (tensor_src){{"output.weight", 2, {dim, m->vocab_size, 1, 1}, WISP_TYPE_F32}, m->off_classifier};
            } else {
                static const char *const suffix[9] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                                      "ffn_norm", "ffn_gate", "ffn_down", "ffn_up"};
                const int64_t ne[9][2] = {{dim, 1}, {dim, dim}, {dim, kv}, {dim, kv}, {dim, dim},
                                          {dim, 1}, {dim, hid}, {hid, dim}, {dim, hid}};
                const size_t base[9] = {m->off_rms_att, m->off_wq, m->off_wk, m->off_wv, m->off_wo,
                                        m->off_rms_ffn, m->off_w1, m->off_w2, m->off_w3};
                for (int k = 0; k < 9; k++) {
                    wisp_format(names[k], sizeof names[k], "blk.%d.%s.weight", (int)l, suffix[k]);
                    size_t per = (size_t)(ne[k][0] * ne[k][1]) * 4;
                    list[n++] = (tensor_src){{names[k], ne[k][1] == 1 ? 1u : 2u, {ne[k][0], ne[k][1], 1, 1}, WISP_TYPE_F32},
                                             base[k] + (size_t)l * per};
                }
            }
            for (int k = 0; k < n; k++) {
                if (pass == 0) {
                    if ((st = wisp_gguf_write_tensor_info(sink, &list[k].t, offset, err))) return st;
                    offset += wisp_gguf_tensor_padded_bytes(&list[k].t, 32);
                    written_infos++;
                } else {
                    size_t bytes = (size_t)wisp_gguf_tensor_bytes(&list[k].t);
                    if ((st = wisp_sink_write(sink, m->bytes + list[k].offset, bytes, err))) return st;
                    if ((st = wisp_sink_pad(sink, 32, err))) return st;
                }
            }
        }
        if (pass == 0) {
            if (written_infos != n_tensors) return wisp_fail(err, WISP_ERR_INTERNAL, "tensor count mismatch");
            if ((st = wisp_sink_pad(sink, 32, err))) return st;
        }
    }
    return WISP_OK;
}
