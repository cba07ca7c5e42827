/* JSON Schema -> GBNF grammar text, for constrained generation and checking.
 *
 * Supported: type (one or a list), properties / required /
 * additionalProperties (false, true or a schema) with members in ANY order
 * (up to 8 listed properties), enum and const (scalar values), items,
 * minItems / maxItems, minimum / maximum / exclusiveMinimum /
 * exclusiveMaximum on integers and numbers, multipleOf 1 (integers) and
 * powers of ten 10^-k (numbers: at most k significant decimals), minLength /
 * maxLength, pattern (anchored or not: literals, classes, . \d \w \s, groups,
 * alternation, * + ? {m,n}), format (date, time, date-time, email, uuid),
 * anyOf, oneOf (whose branches must be provably disjoint), allOf of object
 * schemas, $ref into #/$defs and #/definitions (recursion included), and
 * the annotations title, description, $schema, $id, $comment, default,
 * examples. Anything else is refused with an error naming the keyword.
 *
 * The language is exact for what it supports, with stated restrictions
 * that only ever REFUSE valid text, never admit invalid text: whitespace
 * is " " or a newline and up to 20 spaces/tabs; numbers have at most 17
 * integer and 16 fraction digits (and no exponent when bounded); strings
 * in enum/const must be spelled as in the schema; additional property
 * names and pattern strings use no escapes. */
#ifndef WISP_JSON_SCHEMA_H
#define WISP_JSON_SCHEMA_H

#include <stddef.h>

#include "json.h"
#include "status.h"

/* Bounds for generating from a model that may ramble (tiny or random-weight
 * models): they only ever narrow the language (everything accepted stays
 * valid). Zero: no bound. */
typedef struct wisp_json_schema_limits {
    unsigned max_string;   /* characters of a string without its own maxLength; also unanchored pattern ends */
    unsigned max_items;    /* items of an array without maxItems; also * + {m,} in patterns */
    unsigned max_depth;    /* nesting of an "any JSON value" (with max_items) and of a $ref'd definition in itself */
    int strict_objects;    /* no properties beyond those listed unless additionalProperties allows them */
} wisp_json_schema_limits;

/* What `wisp run --json-bounded` uses: 24 characters, 4 items, nesting 1 (a $ref'd definition
 * inside itself once; deeper branches are left out), strict objects. */
wisp_json_schema_limits wisp_json_schema_bounded(void);

wisp_status wisp_json_schema_to_gbnf_ex(const wisp_json *schema, const wisp_json_schema_limits *lim, char *out,
                                        size_t cap, size_t *len, wisp_error *err);

/* Write the grammar for the schema at node 0 of `schema` into out[0..cap)
 * (NUL-terminated); *len gets the full length even when cap is too small
 * (then WISP_ERR_CAPACITY: call again with *len + 1). */
wisp_status wisp_json_schema_to_gbnf(const wisp_json *schema, char *out, size_t cap, size_t *len, wisp_error *err);

/* The grammar of any JSON value (object_only: any JSON object); lim may be NULL. */
size_t wisp_json_any_gbnf(int object_only, const wisp_json_schema_limits *lim, char *out, size_t cap);

#endif
