/* Tool calls: family, grammar, structured answer (see chat_tools.h). */
#include "tool_calls.h"

#include <stdlib.h>
#include <string.h>

#include "chat_tools.h" /* adapters: checking the tool list */
#include "grammar_source.h"
#include "json.h"

#define HERMES_OPEN "<tool_call>\n"
#define HERMES_CLOSE "\n</tool_call>"

cli_tool_family cli_tools_family(const char *src) {
    if (!src) return TOOLS_UNKNOWN;
    /* Qwen2.5/Qwen3/Hermes name their wrapper; chatml without tools in its
     * template (SmolLM2) is the same family */
    if (strstr(src, "<tool_call>") || strstr(src, "<|im_start|>")) return TOOLS_HERMES;
    if (strstr(src, "<|start_header_id|>")) return TOOLS_LLAMA3;
    return TOOLS_UNKNOWN;
}

const char *cli_tools_family_name(cli_tool_family f) {
    return f == TOOLS_HERMES ? "hermes (<tool_call>)" : f == TOOLS_LLAMA3 ? "llama3 (JSON)" : "unknown";
}

/* Appends to a growing malloc'd string; false when out of memory. */
typedef struct strbuf {
    char *s;
    size_t len, cap;
} strbuf;

static bool put(strbuf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *bigger = realloc(b->s, cap);
        if (!bigger) return false;
        b->s = bigger;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
    return true;
}

static bool puts_(strbuf *b, const char *s) { return put(b, s, strlen(s)); }

/* One JSON Schema for "a call of any of the tools": anyOf over the tools of
 * {"name": const NAME, ARGS: parameters}, compiled once, so the schema
 * compiler's rule names never clash. */
static bool call_schema(strbuf *b, const wisp_json *j, size_t n_tools, const char *args_key) {
    bool ok = puts_(b, "{\"anyOf\": [");
    for (size_t i = 0; ok && i < n_tools; i++) {
        int64_t name = wisp_chat_tool_name(j, 0, i), params = wisp_chat_tool_parameters(j, 0, i);
        const wisp_json_node *nn = &j->nodes[name];
        ok = puts_(b, i ? ", " : "") && puts_(b, "{\"type\": \"object\", \"properties\": {\"name\": {\"const\": \"") &&
             put(b, j->text + nn->start, nn->end - nn->start) && puts_(b, "\"}, \"") && puts_(b, args_key) && puts_(b, "\": ");
        if (ok && params >= 0) ok = put(b, j->text + j->nodes[params].start, j->nodes[params].end - j->nodes[params].start);
        else if (ok) ok = puts_(b, "{\"type\": \"object\"}");
        ok = ok && puts_(b, "}, \"required\": [\"name\", \"") && puts_(b, args_key) &&
             puts_(b, "\"], \"additionalProperties\": false}");
    }
    return ok && puts_(b, "]}");
}

char *cli_tools_gbnf(const char *tools_json, size_t len, cli_tool_family f, bool required, bool bounded) {
    if (f == TOOLS_UNKNOWN) {
        fprintf(stderr, "wisp chat: --tools: the chat template's tool-call format is not one wisp knows "
                        "(known: hermes/Qwen <tool_call>, llama3 JSON); use --tool-choice none to only show the tools\n");
        return NULL;
    }
    wisp_json j;
    wisp_error err = {0};
    size_t need = 0, n_tools = 0;
    wisp_json_parse(&j, tools_json, len, NULL, 0, &need, &err);
    wisp_json_node *nodes = malloc((need ? need : 1) * sizeof *nodes);
    strbuf schema = {0}, g = {0};
    char *gbnf = NULL;
    if (!nodes || wisp_json_parse(&j, tools_json, len, nodes, need, NULL, &err) || wisp_chat_tools_check(&j, 0, &n_tools, &err) ||
        !call_schema(&schema, &j, n_tools, f == TOOLS_HERMES ? "arguments" : "parameters")) {
        fprintf(stderr, "wisp chat: --tools: %s\n", err.message[0] ? err.message : "out of memory");
        goto done;
    }
    gbnf = cli_schema_gbnf(schema.s, schema.len, bounded, "chat --tools");
    if (!gbnf) goto done;
    /* the schema's grammar starts at its `root`; it becomes `tool-call` under a root of ours */
    char *def = strncmp(gbnf, "root ::=", 8) == 0 ? gbnf : strstr(gbnf, "\nroot ::=");
    if (!def) {
        fprintf(stderr, "wisp chat: --tools: the schema grammar has no root rule\n");
        free(gbnf);
        gbnf = NULL;
        goto done;
    }
    size_t at = (size_t)(def - gbnf) + (def == gbnf ? 0 : 1);
    char *later = strstr(gbnf + at + 8, "root");
    char *before = strstr(gbnf, " root");
    if (later || (before && before < gbnf + at)) { /* a rule that refers back to root ($ref "#") */
        fprintf(stderr, "wisp chat: --tools: a tool schema that refers to its own root ($ref \"#\") is not supported\n");
        free(gbnf);
        gbnf = NULL;
        goto done;
    }
    /* free text must not begin like a call, so the two are never confused */
    const char *text_rule = f == TOOLS_HERMES ? "free-text ::= [^<] [^\\x00]*\n" : "free-text ::= [^{] [^\\x00]*\n";
    const char *call = f == TOOLS_HERMES ? "\"<tool_call>\\n\" tool-call \"\\n</tool_call>\"" : "tool-call";
    bool ok = puts_(&g, "root ::= ") && (required || (puts_(&g, "free-text | "))) && puts_(&g, call) && puts_(&g, "\n") &&
              puts_(&g, text_rule) && put(&g, gbnf, at) && puts_(&g, "tool-call") && puts_(&g, gbnf + at + 4);
    free(gbnf);
    gbnf = ok ? g.s : NULL;
    if (ok) g.s = NULL;
    else fprintf(stderr, "wisp chat: out of memory\n");
done:
    free(nodes);
    free(schema.s);
    free(g.s);
    return gbnf;
}

bool cli_tools_print_answer(FILE *out, const char *answer, size_t len, cli_tool_family f) {
    const char *call = NULL;
    size_t call_len = 0;
    size_t open = strlen(HERMES_OPEN), close = strlen(HERMES_CLOSE);
    if (f == TOOLS_HERMES && len >= open + close && memcmp(answer, HERMES_OPEN, open) == 0 &&
        memcmp(answer + len - close, HERMES_CLOSE, close) == 0) {
        call = answer + open;
        call_len = len - open - close;
    } else if (f == TOOLS_LLAMA3 && len && answer[0] == '{') {
        call = answer;
        call_len = len;
    }
    size_t cap = 2 * len + 64;
    char *buf = malloc(cap);
    if (!buf) return false;
    wisp_json_writer w;
    wisp_jw_init(&w, buf, cap, false);
    if (!call) { /* text */
        wisp_jw_begin_object(&w);
        wisp_jw_key(&w, "content");
        wisp_jw_string_n(&w, answer, len);
        wisp_jw_key(&w, "tool_calls");
        wisp_jw_begin_array(&w);
        wisp_jw_end_array(&w);
        wisp_jw_end_object(&w);
        bool ok = wisp_jw_finish(&w);
        if (ok) fprintf(out, "%s\n", buf);
        free(buf);
        return ok;
    }
    free(buf);
    wisp_json j;
    wisp_error err = {0};
    size_t need = 0;
    wisp_json_parse(&j, call, call_len, NULL, 0, &need, &err);
    wisp_json_node *nodes = malloc((need ? need : 1) * sizeof *nodes);
    bool ok = nodes && !wisp_json_parse(&j, call, call_len, nodes, need, NULL, &err);
    int64_t name = ok ? wisp_json_get(&j, 0, "name") : -1;
    int64_t args = ok ? wisp_json_get(&j, 0, f == TOOLS_HERMES ? "arguments" : "parameters") : -1;
    if (!ok || name < 0 || args < 0 || !wisp_json_is(&j, name, WISP_JSON_STRING)) {
        fprintf(stderr, "wisp run --chat: the tool call does not parse: %s\n", err.message[0] ? err.message : "no name or arguments");
        free(nodes);
        return false;
    }
    /* name is a JSON string and arguments a JSON object, both checked by the parser: printed as written */
    fprintf(out, "{\"content\":null,\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"%.*s\",\"arguments\":%.*s}}]}\n",
            (int)(j.nodes[name].end - j.nodes[name].start), call + j.nodes[name].start,
            (int)(j.nodes[args].end - j.nodes[args].start), call + j.nodes[args].start);
    free(nodes);
    return true;
}
