#include "preference_pairs.h"

#include <string.h>

/* at least the fixed text around the parts of an output record and its newline (33 bytes for strings, 51
 * for lists of messages) */
#define RECORD_OVERHEAD 64u

static bool blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return false;
    return true;
}

/* Line [*s, *e) starting at pos; false at the end. */
static bool next_line(const char *b, size_t n, size_t pos, size_t *s, size_t *e) {
    if (pos >= n) return false;
    const char *nl = memchr(b + pos, '\n', n - pos);
    *s = pos;
    *e = nl ? (size_t)(nl - b) : n;
    return true;
}

wisp_status wisp_pairs_plan(const char *bytes, size_t n, size_t *out_bytes, size_t *json_nodes, wisp_error *err) {
    if (!bytes && n) return wisp_fail(err, WISP_ERR_ARG, "no bytes given");
    size_t pos = 0, s, e, lines = 0, longest = 0;
    while (next_line(bytes, n, pos, &s, &e)) {
        pos = e + 1;
        lines++;
        if (e - s > longest) longest = e - s;
    }
    if (n > SIZE_MAX / 2 - RECORD_OVERHEAD * (lines + 1)) return wisp_fail(err, WISP_ERR_CAPACITY, "the data is too large");
    *out_bytes = n + RECORD_OVERHEAD * lines + 1;
    *json_nodes = longest + 2; /* every node takes at least one byte of its line */
    return WISP_OK;
}

static wisp_status refuse(wisp_error *err, size_t line, const char *what) {
    return wisp_fail(err, WISP_ERR_UNSUPPORTED, "line %zu: %s", line, what);
}

/* The three members of a record: all strings, or all lists of messages (*conversational set); or an
 * error naming what is wrong. */
static wisp_status members(const wisp_json *j, size_t line, int64_t node_of[3], bool *conversational, wisp_error *err) {
    static const char *const names[3] = {"prompt", "chosen", "rejected"};
    if (!wisp_json_is(j, 0, WISP_JSON_OBJECT))
        return wisp_fail(err, WISP_ERR_FORMAT, "line %zu: not a JSON object", line);
    char name[64];
    if (!wisp_json_pick(j, 0, names, 3, node_of, name, sizeof name))
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "line %zu: key \"%s\": a preference pair has exactly \"prompt\", "
                         "\"chosen\" and \"rejected\"", line, name);
    int n_lists = 0;
    for (int k = 0; k < 3; k++) {
        int64_t v = node_of[k];
        if (v < 0) continue;
        if (!wisp_json_is(j, v, WISP_JSON_STRING) && !wisp_json_is(j, v, WISP_JSON_ARRAY))
            return wisp_fail(err, WISP_ERR_FORMAT, "line %zu: \"%s\" must be a string or a list of messages", line, names[k]);
        n_lists += wisp_json_is(j, v, WISP_JSON_ARRAY);
    }
    for (int k = 0; k < 3; k++)
        if (node_of[k] < 0)
            return k == 0 ? refuse(err, line, "no \"prompt\" (trl's implicit-prompt form, where chosen and rejected "
                                              "repeat the prompt, is not taken: give it separately)")
                          : wisp_fail(err, WISP_ERR_FORMAT, "line %zu: no \"%s\"", line, names[k]);
    if (n_lists != 0 && n_lists != 3)
        return wisp_fail(err, WISP_ERR_FORMAT, "line %zu: prompt, chosen and rejected must all be strings or all be "
                         "lists of messages (trl's conversational form)", line);
    *conversational = n_lists == 3;
    return WISP_OK;
}

static void put(char *out, size_t *len, const char *s, size_t n) {
    memcpy(out + *len, s, n);
    *len += n;
}

wisp_status wisp_pairs_side(const char *bytes, size_t n, wisp_pair_side side, wisp_json_node *nodes, size_t cap_nodes,
                            char *out, size_t cap, size_t *out_len, wisp_error *err) {
    size_t need, need_nodes;
    wisp_status st = wisp_pairs_plan(bytes, n, &need, &need_nodes, err);
    if (st) return st;
    if (cap < need || cap_nodes < need_nodes)
        return wisp_fail(err, WISP_ERR_CAPACITY, "preference data needs %zu output bytes and %zu JSON nodes (%zu and %zu given)",
                         need, need_nodes, cap, cap_nodes);
    if (side != WISP_PAIR_CHOSEN && side != WISP_PAIR_REJECTED) return wisp_fail(err, WISP_ERR_ARG, "unknown side");
    size_t pos = 0, s, e, line = 0, len = 0, records = 0;
    while (next_line(bytes, n, pos, &s, &e)) {
        pos = e + 1;
        line++;
        if (blank(bytes + s, e - s)) { /* kept, so both sides and the file share line numbers */
            out[len++] = '\n';
            continue;
        }
        wisp_json j;
        if ((st = wisp_json_parse(&j, bytes + s, e - s, nodes, cap_nodes, NULL, err)))
            return wisp_error_prefix(err, "line %zu", line);
        int64_t node_of[3] = {-1, -1, -1};
        bool lists = false;
        if ((st = members(&j, line, node_of, &lists, err))) return st;
        const wisp_json_node *p = &j.nodes[node_of[0]], *c = &j.nodes[node_of[side == WISP_PAIR_CHOSEN ? 1 : 2]],
                             *o = &j.nodes[node_of[side == WISP_PAIR_CHOSEN ? 2 : 1]];
        if (lists) { /* the lists as written, and the other answer, which bounds the prompt's rendering (train_data.h) */
            put(out, &len, "{\"prompt\": ", 11);
            put(out, &len, bytes + s + p->start, p->end - p->start);
            put(out, &len, ", \"completion\": ", 16);
            put(out, &len, bytes + s + c->start, c->end - c->start);
            put(out, &len, ", \"paired_completion\": ", 23);
            put(out, &len, bytes + s + o->start, o->end - o->start);
            put(out, &len, "}\n", 2);
        } else {
            put(out, &len, "{\"prompt\": \"", 12);
            put(out, &len, bytes + s + p->start, p->end - p->start);
            put(out, &len, "\", \"completion\": \"", 18);
            put(out, &len, bytes + s + c->start, c->end - c->start);
            put(out, &len, "\"}\n", 3);
        }
        records++;
    }
    if (records == 0) return wisp_fail(err, WISP_ERR_FORMAT, "no preference pair in the data");
    out[len] = 0;
    *out_len = len;
    return WISP_OK;
}
