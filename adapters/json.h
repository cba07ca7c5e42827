/* A strict JSON reader (RFC 8259) that allocates nothing: parsing fills a
 * caller array of nodes describing the text in place, and accessors read
 * numbers and unescape strings on demand. Plus a small writer into a caller
 * buffer. Used for PEFT configs, golden files, run configs and JSONL data. */
#ifndef WISP_JSON_H
#define WISP_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef enum wisp_json_type {
    WISP_JSON_NULL,
    WISP_JSON_FALSE,
    WISP_JSON_TRUE,
    WISP_JSON_NUMBER,
    WISP_JSON_STRING,
    WISP_JSON_ARRAY,
    WISP_JSON_OBJECT
} wisp_json_type;

/* One value. Objects list their members as key (string node) then value, so
 * an object with n members has 2n children. */
typedef struct wisp_json_node {
    uint32_t type;
    uint32_t start, end; /* byte range in the text (strings: inside the quotes) */
    uint32_t count;      /* children: array elements, or 2 x object members */
    uint32_t after;      /* index of the node following this whole subtree */
    uint32_t parent;     /* index of the enclosing array/object (the root: itself) */
} wisp_json_node;

typedef struct wisp_json {
    const char *text;
    size_t len;
    wisp_json_node *nodes;
    size_t n_nodes;
} wisp_json;

#define WISP_JSON_MAX_DEPTH 64

/* Parse `text` into `nodes` (capacity `cap`). With too small a capacity it
 * returns WISP_ERR_CAPACITY and sets *needed (call with cap 0 to size).
 * Texts longer than 4 GiB are rejected. Duplicate object keys are errors. */
wisp_status wisp_json_parse(wisp_json *j, const char *text, size_t len, wisp_json_node *nodes, size_t cap,
                            size_t *needed, wisp_error *err);

/* Navigation by node index (the root is 0). -1 when absent. */
int64_t wisp_json_get(const wisp_json *j, int64_t obj, const char *key);
int64_t wisp_json_first(const wisp_json *j, int64_t parent); /* first element / first key */
int64_t wisp_json_next(const wisp_json *j, int64_t node);    /* next sibling (within its parent) */
int64_t wisp_json_at(const wisp_json *j, int64_t arr, size_t i);
/* A record with a fixed set of keys: the value of each key names[k] of object `obj` goes to
 * value_of[k] (absent keys leave theirs as it was). False when a key is none of the names: the
 * first such key is then in stranger (cut to cap - 1 bytes), for the caller's error, which knows
 * what the record is. */
bool wisp_json_pick(const wisp_json *j, int64_t obj, const char *const *names, int n, int64_t *value_of, char *stranger,
                    size_t cap);

/* Values. `wisp_json_number` parses to double (correct to within an ulp). */
bool wisp_json_number(const wisp_json *j, int64_t node, double *out);
bool wisp_json_int(const wisp_json *j, int64_t node, int64_t *out); /* integral numbers only */
bool wisp_json_bool(const wisp_json *j, int64_t node, bool *out);
/* Unescaped UTF-8 of a string node; returns the full length (copies up to cap-1, NUL-terminates). */
size_t wisp_json_string(const wisp_json *j, int64_t node, char *buf, size_t cap);
bool wisp_json_string_eq(const wisp_json *j, int64_t node, const char *s);
bool wisp_json_is(const wisp_json *j, int64_t node, wisp_json_type t);

/* Writer into a caller buffer. Overflow is sticky: `len` keeps counting so
 * the caller learns the size needed, and `overflow` is set. */
typedef struct wisp_json_writer {
    char *buf;
    size_t cap, len;
    bool overflow;
    int depth;
    bool need_comma[WISP_JSON_MAX_DEPTH];
    bool after_key; /* a key was written; its value comes next */
    bool pretty;
} wisp_json_writer;

void wisp_jw_init(wisp_json_writer *w, char *buf, size_t cap, bool pretty);
void wisp_jw_begin_object(wisp_json_writer *w);
void wisp_jw_end_object(wisp_json_writer *w);
void wisp_jw_begin_array(wisp_json_writer *w);
void wisp_jw_end_array(wisp_json_writer *w);
void wisp_jw_key(wisp_json_writer *w, const char *key);
void wisp_jw_string(wisp_json_writer *w, const char *s);
void wisp_jw_string_n(wisp_json_writer *w, const char *s, size_t n);
void wisp_jw_int(wisp_json_writer *w, int64_t v);
void wisp_jw_double(wisp_json_writer *w, double v, int significant_digits); /* non-finite -> null */
void wisp_jw_bool(wisp_json_writer *w, bool v);
void wisp_jw_null(wisp_json_writer *w);
/* Finish: NUL-terminate; returns false on overflow or unbalanced nesting. */
bool wisp_jw_finish(wisp_json_writer *w);
/* Finish a document written into a caller's buffer of `cap` bytes, for the
 * measure-then-write calls (NULL/0 first): *len = the bytes it needs without the
 * NUL; WISP_ERR_CAPACITY naming `what` when the buffer is short. */
wisp_status wisp_jw_finish_sized(wisp_json_writer *w, size_t cap, size_t *len, const char *what, wisp_error *err);

#endif
