/* Template statements (text, output, if, for, set, macro, break/continue),
 * variable scopes as Jinja2 has them (a for loop's body is its own scope, an
 * `if` is not, a macro sees only its parameters and the globals), and the
 * public plan / init / render functions.
 *
 * The work heap is a bump allocator. It is released back to a mark after an
 * output statement, an `if` condition and each loop iteration, unless a
 * namespace attribute was assigned meanwhile (the only way a value made there
 * can outlive the statement), so long conversations render in small memory. */
#include <string.h>

#include "template_value.h"

#define MAX_MACRO_DEPTH 32

enum { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE };

static const tpl_node *node_at(tpl_render *r, uint32_t i) { return &r->t->nodes[i]; }

bool tpl_step(tpl_render *r, uint32_t line) {
    if (++r->steps <= r->t->lim.max_steps) return true;
    return tpl_error(r, WISP_ERR_CAPACITY, line, "rendering took more than %u steps (max_steps)", r->t->lim.max_steps);
}

/* ---- scopes ---- */

bool tpl_push_frame(tpl_render *r, bool barrier) {
    if (r->n_frames >= TPL_MAX_FRAMES) return tpl_error(r, WISP_ERR_CAPACITY, 0, "scopes nested deeper than %d", TPL_MAX_FRAMES);
    r->frame_start[r->n_frames] = r->n_vars;
    r->frame_barrier[r->n_frames++] = barrier;
    return true;
}

void tpl_pop_frame(tpl_render *r) {
    r->n_vars = r->frame_start[--r->n_frames];
}

const tpl_val *tpl_lookup(tpl_render *r, const char *name, size_t n) {
    tpl_var *vars = r->t->vars;
    for (int f = (int)r->n_frames - 1; f >= 0; f--) {
        uint32_t end = (uint32_t)f + 1 < r->n_frames ? r->frame_start[f + 1] : r->n_vars;
        for (uint32_t i = end; i > r->frame_start[f]; i--)
            if (vars[i - 1].len == n && memcmp(vars[i - 1].name, name, n) == 0) return &vars[i - 1].val;
        if (r->frame_barrier[f] && f > 0) f = 1; /* a macro: on to the globals */
    }
    return NULL;
}

bool tpl_bind(tpl_render *r, const char *name, size_t n, tpl_val v) {
    tpl_var *vars = r->t->vars;
    for (uint32_t i = r->n_vars; i > r->frame_start[r->n_frames - 1]; i--)
        if (vars[i - 1].len == n && memcmp(vars[i - 1].name, name, n) == 0) {
            vars[i - 1].val = v;
            return true;
        }
    if (r->n_vars >= r->t->var_cap)
        return tpl_error(r, WISP_ERR_CAPACITY, 0, "more than %u live variables (max_variables)", r->t->var_cap);
    vars[r->n_vars].name = name;
    vars[r->n_vars].len = (uint32_t)n;
    vars[r->n_vars++].val = v;
    return true;
}

/* ---- output ---- */

static bool emit(tpl_render *r, const char *s, size_t n) {
    if (r->failed) return false;
    if (n >= r->cap - r->len)
        return tpl_error(r, WISP_ERR_CAPACITY, 0, "the rendered text does not fit in %zu bytes", r->cap);
    tpl_note_copy(r, s, n, r->len, true);
    memcpy(r->out + r->len, s, n);
    r->len += n;
    return true;
}

/* Template text with its line endings as Jinja makes them: all `\n`. */
static bool emit_text(tpl_render *r, const char *s, size_t n) {
    size_t start = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\r') {
            if (!emit(r, s + start, i - start) || !emit(r, "\n", 1)) return false;
            if (i + 1 < n && s[i + 1] == '\n') i++;
            start = i + 1;
        }
    return emit(r, s + start, n - start);
}

static bool emit_value(tpl_render *r, const tpl_val *v) {
    if (v->kind == V_STR) return emit(r, v->u.s, v->n);
    size_t mark = r->heap_used;
    tpl_sb b;
    tpl_sb_begin(r, &b);
    if (!tpl_write_str(&b, v)) return false;
    tpl_val s = tpl_sb_end(&b);
    bool ok = emit(r, s.u.s, s.n);
    tpl_release(r, mark);
    return ok;
}

static int render_body(tpl_render *r, uint32_t body);

/* Render a body into a new heap string instead of the output. */
static tpl_val capture(tpl_render *r, uint32_t body) {
    size_t start = r->len;
    render_body(r, body);
    if (r->failed) return tpl_undef();
    tpl_sb b;
    tpl_sb_begin(r, &b);
    tpl_sb_put(&b, r->out + start, r->len - start);
    r->len = start;
    /* what the body wrote is a string now, and its content pieces went with it */
    while (r->spans && r->n_spans && r->spans[r->n_spans - 1].start >= start) r->n_spans--;
    if (r->spans && r->n_spans && r->spans[r->n_spans - 1].start + r->spans[r->n_spans - 1].len > start)
        r->spans[r->n_spans - 1].len = start - r->spans[r->n_spans - 1].start;
    return tpl_sb_end(&b);
}

tpl_val tpl_call_macro(tpl_render *r, const tpl_node *call, const tpl_val *macro) {
    const tpl_node *m = node_at(r, (uint32_t)macro->u.i);
    if (r->call_depth >= MAX_MACRO_DEPTH)
        return tpl_error(r, WISP_ERR_CAPACITY, call->line, "macro calls nested deeper than %d", MAX_MACRO_DEPTH), tpl_undef();
    /* the arguments are evaluated in the caller's scope */
    tpl_val pos[16], kw[16];
    const tpl_node *kwn[16];
    uint32_t n_pos = 0, n_kw = 0;
    for (uint32_t i = call->b; i && !r->failed; i = node_at(r, i)->next) {
        const tpl_node *a = node_at(r, i);
        if (n_pos >= 16 || n_kw >= 16) return tpl_error(r, WISP_ERR_UNSUPPORTED, call->line, "more than 16 macro arguments"), tpl_undef();
        if (a->kind == N_KWARG) kwn[n_kw] = a, kw[n_kw++] = tpl_eval(r, a->a);
        else pos[n_pos++] = tpl_eval(r, i);
    }
    if (r->failed || !tpl_push_frame(r, true)) return tpl_undef();
    r->call_depth++;
    uint32_t k = 0, used_kw = 0;
    for (uint32_t i = m->a; i && !r->failed; i = node_at(r, i)->next, k++) {
        const tpl_node *p = node_at(r, i);
        const char *name = tpl_node_str(r->t, p);
        tpl_val v = tpl_undef();
        bool given = false;
        if (k < n_pos) v = pos[k], given = true;
        for (uint32_t j = 0; j < n_kw; j++)
            if (kwn[j]->n == p->n && memcmp(tpl_node_str(r->t, kwn[j]), name, p->n) == 0) {
                if (given) return tpl_error(r, WISP_ERR_ARG, call->line, "macro got multiple values for '%.*s'", (int)p->n, name), tpl_undef();
                v = kw[j], given = true, used_kw++;
            }
        if (!given && p->kind == N_KWARG) v = tpl_eval(r, p->a);
        tpl_bind(r, name, p->n, v);
    }
    if (n_pos > k || used_kw < n_kw)
        return tpl_error(r, WISP_ERR_UNSUPPORTED, call->line, "macro '%.*s' called with arguments it does not declare (varargs/kwargs)",
                         (int)m->n, tpl_node_str(r->t, m)), tpl_undef();
    tpl_val out = capture(r, m->b);
    r->call_depth--;
    tpl_pop_frame(r);
    return out;
}

/* ---- statements ---- */

static bool assign_targets(tpl_render *r, uint32_t first, const tpl_val *v, uint32_t line) {
    if (!node_at(r, first)->next) return tpl_bind(r, tpl_node_str(r->t, node_at(r, first)), node_at(r, first)->n, *v);
    uint32_t count = 0;
    for (uint32_t i = first; i; i = node_at(r, i)->next) count++;
    if (v->kind != V_LIST || v->u.l->n != count)
        return tpl_error(r, WISP_ERR_ARG, line, "cannot unpack a %s into %u names", tpl_type_name(v), count);
    uint32_t k = 0;
    for (uint32_t i = first; i && !r->failed; i = node_at(r, i)->next)
        tpl_bind(r, tpl_node_str(r->t, node_at(r, i)), node_at(r, i)->n, v->u.l->items[k++]);
    return !r->failed;
}

static int render_for(tpl_render *r, const tpl_node *n) {
    tpl_val seq = tpl_eval(r, n->b);
    if (r->failed) return FLOW_NORMAL;
    const tpl_list *items = tpl_iterable(r, &seq, n->line);
    if (!items) return FLOW_NORMAL;
    if (n->e) { /* `for x in xs if cond`: filtered first, so loop.length counts what remains */
        tpl_list *kept = tpl_list_new(r, items->n);
        if (!kept || !tpl_push_frame(r, false)) return FLOW_NORMAL;
        kept->n = 0;
        for (uint32_t i = 0; i < items->n && !r->failed; i++) {
            r->n_vars = r->frame_start[r->n_frames - 1];
            assign_targets(r, n->a, &items->items[i], n->line);
            tpl_val c = tpl_eval(r, n->e);
            if (tpl_truthy(&c)) kept->items[kept->n++] = items->items[i];
        }
        tpl_pop_frame(r);
        items = kept;
    }
    tpl_loop *lp = tpl_alloc(r, sizeof *lp);
    if (!lp || !tpl_push_frame(r, false)) return FLOW_NORMAL;
    lp->items = items;
    size_t mark = r->heap_used;
    uint64_t retains = r->retains;
    for (uint32_t i = 0; i < items->n && !r->failed && tpl_step(r, n->line); i++) {
        r->n_vars = r->frame_start[r->n_frames - 1]; /* each iteration starts with a fresh body scope */
        lp->index0 = i;
        assign_targets(r, n->a, &items->items[i], n->line);
        tpl_val lv = {V_LOOP, 0, {0}};
        lv.u.loop = lp;
        tpl_bind(r, "loop", 4, lv);
        int flow = render_body(r, n->c);
        if (r->retains == retains) tpl_release(r, mark);
        if (flow == FLOW_BREAK) break;
    }
    tpl_pop_frame(r);
    if (items->n == 0 && n->d && !r->failed) return render_body(r, n->d);
    return FLOW_NORMAL;
}

static void render_set(tpl_render *r, const tpl_node *n) {
    const tpl_node *target = node_at(r, n->a);
    tpl_val v = tpl_eval(r, n->b);
    if (r->failed) return;
    if (target->kind == N_GETATTR) { /* ns.attr = value */
        const tpl_node *obj = node_at(r, target->a);
        const tpl_val *ns = tpl_lookup(r, tpl_node_str(r->t, obj), obj->n);
        if (!ns || ns->kind != V_NAMESPACE) {
            tpl_error(r, WISP_ERR_ARG, n->line, "cannot assign attribute on non-namespace object '%.*s'", (int)obj->n,
                      tpl_node_str(r->t, obj));
            return;
        }
        r->retains++;
        tpl_dict_set(r, ns->u.d, tpl_str(tpl_node_str(r->t, target), target->n), v);
        return;
    }
    if (target->kind == N_TUPLE) {
        assign_targets(r, target->a, &v, n->line);
        return;
    }
    tpl_bind(r, tpl_node_str(r->t, target), target->n, v);
}

static int render_statement(tpl_render *r, uint32_t i) {
    const tpl_node *n = node_at(r, i);
    if (!tpl_step(r, n->line)) return FLOW_NORMAL;
    switch (n->kind) {
    case N_TEXT: emit_text(r, tpl_node_str(r->t, n), n->n); return FLOW_NORMAL;
    case N_OUTPUT: {
        size_t mark = r->heap_used;
        uint64_t retains = r->retains;
        tpl_val v = tpl_eval(r, n->a);
        if (!r->failed) emit_value(r, &v);
        if (r->retains == retains) tpl_release(r, mark);
        return FLOW_NORMAL;
    }
    case N_IF: {
        size_t mark = r->heap_used;
        uint64_t retains = r->retains;
        tpl_val c = tpl_eval(r, n->a);
        bool yes = tpl_truthy(&c);
        if (r->retains == retains) tpl_release(r, mark);
        if (r->failed) return FLOW_NORMAL;
        if (yes) return render_body(r, n->b);
        if (!n->c) return FLOW_NORMAL;
        return node_at(r, n->c)->kind == N_IF ? render_statement(r, n->c) : render_body(r, n->c);
    }
    case N_FOR: return render_for(r, n);
    case N_SET: render_set(r, n); return FLOW_NORMAL;
    case N_SET_BLOCK: {
        tpl_val v = capture(r, n->b);
        if (!r->failed) tpl_bind(r, tpl_node_str(r->t, node_at(r, n->a)), node_at(r, n->a)->n, v);
        return FLOW_NORMAL;
    }
    case N_MACRO: {
        tpl_val v = {V_MACRO, 0, {0}};
        v.u.i = i;
        tpl_bind(r, tpl_node_str(r->t, n), n->n, v);
        return FLOW_NORMAL;
    }
    case N_BREAK: return FLOW_BREAK;
    case N_CONTINUE: return FLOW_CONTINUE;
    case N_BODY: return render_body(r, i);
    default: tpl_error(r, WISP_ERR_INTERNAL, n->line, "node kind %d is not a statement", n->kind); return FLOW_NORMAL;
    }
}

static int render_body(tpl_render *r, uint32_t body) {
    if (!body) return FLOW_NORMAL;
    for (uint32_t i = node_at(r, body)->a; i && !r->failed; i = node_at(r, i)->next) {
        int flow = render_statement(r, i);
        if (flow != FLOW_NORMAL) return flow;
    }
    return FLOW_NORMAL;
}

/* ---- plan, init, render ---- */

void wisp_template_limits_resolve(wisp_template_limits *lim) {
    if (!lim->work_bytes) lim->work_bytes = 256 * 1024;
    if (!lim->max_variables) lim->max_variables = 256;
    if (!lim->max_steps) lim->max_steps = 10 * 1000 * 1000;
    if (!lim->max_segments) lim->max_segments = 4096;
}

/* Jinja would turn these into line breaks as well (str.splitlines); wisp refuses
 * them rather than read the template differently. */
static wisp_status check_source(const char *src, size_t len, wisp_error *err) {
    if (len > 64u * 1024 * 1024) return wisp_fail(err, WISP_ERR_UNSUPPORTED, "template: longer than 64 MiB");
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)src[i];
        uint32_t cp = c == '\v' || c == '\f' || (c >= 0x1C && c <= 0x1E) ? c : 0;
        if (c == 0xC2 && i + 1 < len && (unsigned char)src[i + 1] == 0x85) cp = 0x85;
        if (c == 0xE2 && i + 2 < len && (unsigned char)src[i + 1] == 0x80 && ((unsigned char)src[i + 2] & 0xFE) == 0xA8)
            cp = 0x2028 + ((unsigned char)src[i + 2] & 1);
        if (cp) {
            char hex[5] = {0};
            for (int k = 3; k >= 0; k--, cp >>= 4) hex[k] = "0123456789ABCDEF"[cp & 15];
            return wisp_fail(err, WISP_ERR_UNSUPPORTED, "template: line separator U+%s (at byte %zu) is not supported", hex, i);
        }
        if (c == 0) return wisp_fail(err, WISP_ERR_FORMAT, "template: NUL byte at %zu", i);
    }
    return WISP_OK;
}

/* keep_trailing_newline is off: one final line ending is not part of the template */
static uint32_t effective_length(const char *src, size_t len) {
    if (len >= 2 && src[len - 2] == '\r' && src[len - 1] == '\n') return (uint32_t)len - 2;
    if (len >= 1 && (src[len - 1] == '\n' || src[len - 1] == '\r')) return (uint32_t)len - 1;
    return (uint32_t)len;
}

/* One layout for planning (t NULL: sizes are only added up) and carving. */
typedef struct layout_sizes {
    size_t header, src, pool, nodes, vars, heap, segs;
} layout_sizes;

static wisp_status layout(const char *src, size_t len, const wisp_template_limits *lim, layout_sizes *z, wisp_error *err) {
    wisp_status s = check_source(src, len, err);
    if (s) return s;
    uint32_t tokens = 0;
    s = tpl_count_tokens(src, effective_length(src, len), &tokens, err);
    if (s) return s;
    z->header = wisp_bytes_of(1, sizeof(wisp_template));
    z->src = wisp_bytes_of(len + 1, 1);
    z->pool = wisp_bytes_of(len + 1, 1);
    z->nodes = wisp_bytes_of((size_t)tokens * 2 + 2, sizeof(tpl_node)); /* at most two nodes per token, plus node 0 */
    z->vars = wisp_bytes_of(lim->max_variables, sizeof(tpl_var));
    z->heap = wisp_bytes_of(lim->work_bytes, 1);
    z->segs = wisp_bytes_of(lim->max_segments, sizeof(tpl_seg));
    return WISP_OK;
}

static size_t total(const layout_sizes *z) {
    size_t t = 0;
    t = wisp_bytes_add(t, z->header);
    t = wisp_bytes_add(t, z->src);
    t = wisp_bytes_add(t, z->pool);
    t = wisp_bytes_add(t, z->nodes);
    t = wisp_bytes_add(t, z->vars);
    t = wisp_bytes_add(t, z->heap);
    return wisp_bytes_add(t, z->segs);
}

wisp_status wisp_template_plan(const char *src, size_t len, const wisp_template_limits *lim_in, size_t *bytes,
                               wisp_error *err) {
    wisp_template_limits lim = lim_in ? *lim_in : (wisp_template_limits){0, 0, 0, 0};
    wisp_template_limits_resolve(&lim);
    layout_sizes z;
    if (!src && len) return wisp_fail(err, WISP_ERR_ARG, "template: no source");
    wisp_status s = layout(src ? src : "", len, &lim, &z, err);
    if (s) return s;
    *bytes = total(&z);
    return WISP_OK;
}

wisp_status wisp_template_init(wisp_template **out, void *mem, size_t size, const char *src, size_t len,
                               const wisp_template_limits *lim_in, wisp_error *err) {
    wisp_template_limits lim = lim_in ? *lim_in : (wisp_template_limits){0, 0, 0, 0};
    wisp_template_limits_resolve(&lim);
    wisp_error local;
    if (!err) err = &local;
    err->status = WISP_OK;
    if (!out || (!src && len) || (!mem && size)) return wisp_fail(err, WISP_ERR_ARG, "template: missing argument");
    if (!src) src = "";
    layout_sizes z;
    wisp_status s = layout(src, len, &lim, &z, err);
    if (s) return s;
    size_t need = total(&z);
    if (size < need)
        return wisp_fail(err, WISP_ERR_ARENA, "template: the arena has %zu bytes but the plan needs %zu (%zu short)", size,
                         need, need - size);
    if ((uintptr_t)mem % WISP_ARENA_BASE_ALIGN)
        return wisp_fail(err, WISP_ERR_ARG, "template: memory must be %d-byte aligned", WISP_ARENA_BASE_ALIGN);
    wisp_arena a;
    wisp_arena_init(&a, mem, size);
    wisp_template *t = wisp_arena_alloc(&a, sizeof *t, WISP_PART_TEXT);
    char *src_copy = wisp_arena_alloc(&a, len + 1, WISP_PART_TEXT);
    char *pool = wisp_arena_alloc(&a, len + 1, WISP_PART_TEXT);
    tpl_node *nodes = wisp_arena_alloc(&a, z.nodes, WISP_PART_TEXT);
    tpl_var *vars = wisp_arena_alloc(&a, z.vars, WISP_PART_TEXT);
    uint8_t *heap = wisp_arena_alloc(&a, z.heap, WISP_PART_TEXT);
    tpl_seg *segs = wisp_arena_alloc(&a, z.segs, WISP_PART_TEXT);
    if (!t || !src_copy || !pool || !nodes || !vars || !heap || !segs || a.used != need)
        return wisp_fail(err, WISP_ERR_INTERNAL, "template: carving disagreed with the plan (%zu vs %zu bytes)", a.used, need);
    memcpy(src_copy, src, len);
    t->src = src_copy;
    t->src_len = effective_length(src, len);
    t->pool = pool;
    t->pool_cap = (uint32_t)len + 1;
    t->nodes = nodes;
    t->node_cap = (uint32_t)(z.nodes / sizeof(tpl_node));
    t->vars = vars;
    t->var_cap = lim.max_variables;
    t->heap = heap;
    t->heap_cap = lim.work_bytes;
    t->segs = segs;
    t->seg_cap = lim.max_segments;
    t->lim = lim;
    s = tpl_parse(t, err);
    if (s) return s;
    *out = t;
    return WISP_OK;
}

static bool bind_globals(tpl_render *r) {
    const wisp_template_vars *v = r->vars;
    tpl_list *msgs = tpl_list_new(r, (uint32_t)v->n_messages);
    for (size_t i = 0; msgs && i < v->n_messages && !r->failed; i++) {
        const wisp_chat_message *m = &v->messages[i];
        tpl_dict *d = tpl_dict_new(r, 5);
        if (!d) return false;
        tpl_dict_set(r, d, tpl_str("role", 4), tpl_str(m->role ? m->role : "", m->role_len));
        tpl_dict_set(r, d, tpl_str("content", 7),
                     m->content_is_null ? tpl_none() : tpl_str(m->content ? m->content : "", m->content_len));
        if (m->tool_calls_json) {
            tpl_val calls;
            if (!tpl_from_json(r, m->tool_calls_json, m->tool_calls_json_len, &calls)) return false;
            tpl_dict_set(r, d, tpl_str("tool_calls", 10), calls);
        }
        if (m->tool_call_id) tpl_dict_set(r, d, tpl_str("tool_call_id", 12), tpl_str(m->tool_call_id, m->tool_call_id_len));
        if (m->name) tpl_dict_set(r, d, tpl_str("name", 4), tpl_str(m->name, m->name_len));
        msgs->items[i].kind = V_DICT;
        msgs->items[i].u.d = d;
    }
    tpl_val tools = tpl_none();
    if (v->tools_json && !tpl_from_json(r, v->tools_json, v->tools_json_len, &tools)) return false;
    if (!msgs || !tpl_push_frame(r, false)) return false;
    tpl_bind(r, "tools", 5, tools);
    tpl_bind(r, "messages", 8, tpl_list_val(msgs));
    tpl_bind(r, "add_generation_prompt", 21, tpl_bool(v->add_generation_prompt));
    if (v->bos_token) tpl_bind(r, "bos_token", 9, tpl_str(v->bos_token, strlen(v->bos_token)));
    if (v->eos_token) tpl_bind(r, "eos_token", 9, tpl_str(v->eos_token, strlen(v->eos_token)));
    return !r->failed;
}

wisp_status wisp_template_render(wisp_template *t, const wisp_template_vars *vars, char *out, size_t cap, size_t *len,
                                 wisp_error *err) {
    return wisp_template_render_spans(t, vars, out, cap, len, NULL, 0, NULL, err);
}

wisp_status wisp_template_render_spans(wisp_template *t, const wisp_template_vars *vars, char *out, size_t cap,
                                       size_t *len, wisp_text_span *spans, size_t span_cap, size_t *n_spans,
                                       wisp_error *err) {
    if (!t || !vars || !out || cap == 0 || (!vars->messages && vars->n_messages))
        return wisp_fail(err, WISP_ERR_ARG, "template render: missing argument");
    if (vars->n_messages > 1000000) return wisp_fail(err, WISP_ERR_ARG, "template render: too many messages");
    wisp_error local;
    if (!err) err = &local;
    err->status = WISP_OK;
    tpl_render r;
    memset(&r, 0, sizeof r);
    r.t = t;
    r.vars = vars;
    r.err = err;
    r.out = out;
    r.cap = cap;
    r.spans = spans;
    r.span_cap = spans ? span_cap : 0;
    if (bind_globals(&r)) render_body(&r, t->root);
    out[r.failed ? 0 : r.len] = 0;
    if (len) *len = r.failed ? 0 : r.len;
    if (n_spans) *n_spans = r.failed ? 0 : r.n_spans;
    if (r.failed) return err->status ? err->status : WISP_ERR_INTERNAL;
    return WISP_OK;
}
