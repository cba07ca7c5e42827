/* The values a template computes with (Python's, as Jinja sees them), the
 * work heap they live in, and the renderer's state. */
#ifndef WISP_TEMPLATE_VALUE_H
#define WISP_TEMPLATE_VALUE_H

#include "template_internal.h"
#include "unicode.h"

typedef enum tpl_kind {
    V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_NAMESPACE, V_LOOP, V_MACRO, V_FUNC
} tpl_kind;

/* Globals that are functions. */
enum { FN_RAISE, FN_NAMESPACE, FN_STRFTIME, FN_RANGE, FN_DICT };

struct tpl_list;
struct tpl_dict;
struct tpl_loop;

typedef struct tpl_val {
    uint8_t kind;
    uint32_t n; /* string length */
    union {
        int64_t i; /* bool, int, function id, macro node */
        double f;
        const char *s;
        struct tpl_list *l;
        struct tpl_dict *d; /* dicts and namespaces */
        struct tpl_loop *loop;
    } u;
} tpl_val;

typedef struct tpl_list {
    uint32_t n;
    tpl_val items[];
} tpl_list;

typedef struct tpl_dict { /* insertion-ordered, as Python's */
    uint32_t n, cap;
    tpl_val *keys, *vals;
} tpl_dict;

typedef struct tpl_loop {
    const tpl_list *items;
    uint32_t index0;
} tpl_loop;

/* Bytes [off, off + len) of the heap hold message content. */
typedef struct tpl_seg {
    uint32_t off, len;
} tpl_seg;

typedef struct tpl_var {
    const char *name;
    uint32_t len;
    tpl_val val;
} tpl_var;

#define TPL_MAX_FRAMES 64

/* One render in progress. */
typedef struct tpl_render {
    wisp_template *t;
    const wisp_template_vars *vars;
    wisp_error *err;
    bool failed;
    /* output */
    char *out;
    size_t cap, len;
    /* work heap: a bump allocator, released back to a mark where nothing can still point into it */
    size_t heap_used;
    uint64_t retains; /* counts writes that can keep a heap value alive (namespace attributes, outer sets) */
    /* variables: frames of a stack; a macro frame sees only itself and the globals */
    uint32_t n_vars;
    uint32_t frame_start[TPL_MAX_FRAMES];
    bool frame_barrier[TPL_MAX_FRAMES];
    uint32_t n_frames;
    uint32_t steps;
    int call_depth;
    /* provenance of message content: in heap strings and in the output */
    uint32_t n_segs;
    wisp_text_span *spans;
    size_t span_cap, n_spans;
} tpl_render;

/* heap */
void *tpl_alloc(tpl_render *r, size_t bytes);
void tpl_release(tpl_render *r, size_t mark); /* back to a mark, with the provenance made since */
/* n bytes from src are being copied to heap offset dst, or output offset dst (to_output): carry their provenance */
void tpl_note_copy(tpl_render *r, const char *src, size_t n, size_t dst, bool to_output);
tpl_list *tpl_list_new(tpl_render *r, uint32_t n);
tpl_dict *tpl_dict_new(tpl_render *r, uint32_t cap);
bool tpl_dict_set(tpl_render *r, tpl_dict *d, tpl_val key, tpl_val val);
const tpl_val *tpl_dict_get(const tpl_dict *d, const char *key, size_t n);
/* JSON text (tools, tool calls) -> a value in the heap (template_json.c); false with the error set. */
bool tpl_from_json(tpl_render *r, const char *text, size_t len, tpl_val *out);

/* constructors */
static inline tpl_val tpl_undef(void) { tpl_val v = {V_UNDEF, 0, {0}}; return v; }
static inline tpl_val tpl_none(void) { tpl_val v = {V_NONE, 0, {0}}; return v; }
static inline tpl_val tpl_bool(bool b) { tpl_val v = {V_BOOL, 0, {0}}; v.u.i = b; return v; }
static inline tpl_val tpl_int(int64_t i) { tpl_val v = {V_INT, 0, {0}}; v.u.i = i; return v; }
static inline tpl_val tpl_float(double f) { tpl_val v = {V_FLOAT, 0, {0}}; v.u.f = f; return v; }
static inline tpl_val tpl_str(const char *s, size_t n) { tpl_val v = {V_STR, (uint32_t)n, {0}}; v.u.s = s; return v; }
static inline tpl_val tpl_list_val(tpl_list *l) { tpl_val v = {V_LIST, 0, {0}}; v.u.l = l; return v; }

/* Python semantics */
bool tpl_truthy(const tpl_val *v);
bool tpl_equal(const tpl_val *a, const tpl_val *b);
const char *tpl_type_name(const tpl_val *v);

/* Text building into the heap: a string grows at the heap's top until finished. */
typedef struct tpl_sb {
    tpl_render *r;
    char *buf;
    size_t len;
} tpl_sb;
void tpl_sb_begin(tpl_render *r, tpl_sb *b);
void tpl_sb_put(tpl_sb *b, const char *s, size_t n);
tpl_val tpl_sb_end(tpl_sb *b);

/* str(v) (Jinja's printing: undefined prints nothing), repr and json.dumps (ensure_ascii off). */
bool tpl_write_str(tpl_sb *b, const tpl_val *v);
bool tpl_write_repr(tpl_sb *b, const tpl_val *v);
bool tpl_write_json(tpl_sb *b, const tpl_val *v, int indent, int level);

/* Errors during rendering carry the line of the node being evaluated. */
bool tpl_error(tpl_render *r, wisp_status s, uint32_t line, const char *fmt, ...);

/* Code points (Python indexes strings by them). */
size_t tpl_utf8_len(const char *s, size_t n);
size_t tpl_utf8_offset(const char *s, size_t n, size_t cp_index);

/* Shared by the evaluator (template_eval.c) and the statement renderer (template_render.c). */
tpl_val tpl_eval(tpl_render *r, uint32_t node);
bool tpl_step(tpl_render *r, uint32_t line);                       /* counts against max_steps */
const tpl_val *tpl_lookup(tpl_render *r, const char *name, size_t n); /* NULL: undefined */
bool tpl_bind(tpl_render *r, const char *name, size_t n, tpl_val v);  /* in the innermost frame */
bool tpl_push_frame(tpl_render *r, bool barrier);
void tpl_pop_frame(tpl_render *r);
/* Call a macro: renders its body into a new string. */
tpl_val tpl_call_macro(tpl_render *r, const tpl_node *call, const tpl_val *macro);
/* Iterate: the items of a list, the characters of a string, the keys of a dict. */
const tpl_list *tpl_iterable(tpl_render *r, const tpl_val *v, uint32_t line);

/* ---- shared by the evaluator's files (eval, strings, filters) ---- */

#define TPL_MAX_ARGS 8

/* Evaluated arguments of a call, filter or test. */
typedef struct tpl_args {
    uint32_t n_pos, n_kw;
    tpl_val pos[TPL_MAX_ARGS];
    const char *kw_name[TPL_MAX_ARGS];
    uint32_t kw_len[TPL_MAX_ARGS];
    tpl_val kw[TPL_MAX_ARGS];
} tpl_args;

/* Argument `index` by position, or by name; NULL when not given. */
const tpl_val *tpl_arg(const tpl_args *a, uint32_t index, const char *name);
/* At most max_pos positionals and only the keywords in names (NULL-terminated). */
bool tpl_check_args(tpl_render *r, const tpl_args *a, uint32_t max_pos, const char *const *names, const char *callee,
                    uint32_t line);
tpl_val tpl_to_str(tpl_render *r, const tpl_val *v);
bool tpl_need_str(tpl_render *r, const tpl_val *v, const char *what, uint32_t line);
bool tpl_need_int(tpl_render *r, const tpl_val *v, const char *what, uint32_t line);
bool tpl_is_num(const tpl_val *v);
double tpl_num(const tpl_val *v);
tpl_val tpl_get_item(tpl_render *r, const tpl_val *obj, const tpl_val *key, uint32_t line);
tpl_val tpl_compare(tpl_render *r, int op, const tpl_val *a, const tpl_val *b, uint32_t line);
bool tpl_contains(tpl_render *r, const tpl_val *item, const tpl_val *box, uint32_t line);

static inline uint32_t tpl_decode(const char *s, size_t n, size_t *len) {
    return wisp_utf8_decode((const uint8_t *)s, n, len);
}
/* strings (template_strings.c); `chars` NULL strips whitespace, mode 0..3 is upper/lower/capitalize/title */
tpl_val tpl_strip(const tpl_val *s, const tpl_val *chars, bool left, bool right);
tpl_val tpl_split(tpl_render *r, const tpl_val *s, const tpl_val *sep, int64_t maxsplit, uint32_t line);
tpl_val tpl_replace(tpl_render *r, const tpl_val *s, const tpl_val *old, const tpl_val *with, int64_t count,
                    uint32_t line);
tpl_val tpl_change_case(tpl_render *r, const tpl_val *s, int mode, uint32_t line);
bool tpl_starts_or_ends(tpl_render *r, const tpl_val *s, const tpl_val *x, bool ends, uint32_t line);
tpl_val tpl_format_date(tpl_render *r, const tpl_val *fmt, uint32_t line);
/* filters and tests (template_filters.c) by their tpl_filter / tpl_test ids */
tpl_val tpl_apply_filter(tpl_render *r, int id, const tpl_val *v, const tpl_args *a, uint32_t line);
bool tpl_apply_test(tpl_render *r, int id, const tpl_val *v, const tpl_args *a, uint32_t line);

#endif
