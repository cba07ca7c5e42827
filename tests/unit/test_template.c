/* The Jinja subset beyond the golden templates: each construct against the
 * text Jinja2 (trim_blocks, lstrip_blocks) gives for it, the errors that name
 * what is unsupported, and the arena plan being exact. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "template.h"

static const wisp_chat_message convo[] = {
    {.role = "system", .role_len = 6, .content = "Be brief.", .content_len = 9},
    {.role = "user", .role_len = 4, .content = "Hi", .content_len = 2},
    {.role = "assistant", .role_len = 9, .content = "Hello!", .content_len = 6},
    {.role = "user", .role_len = 4, .content = "  Bye  ", .content_len = 7},
};

static wisp_status render(const char *src, char *out, size_t cap, wisp_error *err) {
    size_t bytes = 0;
    wisp_status s = wisp_template_plan(src, strlen(src), NULL, &bytes, err);
    if (s) return s;
    void *mem = aligned_alloc(64, (bytes + 63) / 64 * 64);
    wisp_template *t = NULL;
    s = wisp_template_init(&t, mem, bytes, src, strlen(src), NULL, err);
    wisp_template_vars vars = {convo, 4, true, "<s>", "</s>", 2024, 7, 26, NULL, 0};
    size_t len = 0;
    if (!s) s = wisp_template_render(t, &vars, out, cap, &len, err);
    free(mem);
    return s;
}

#define EXPECT(src, want)                                                                            \
    do {                                                                                             \
        char out_[4096];                                                                             \
        wisp_error e_ = {0};                                                                         \
        wisp_status s_ = render(src, out_, sizeof out_, &e_);                                        \
        CHECK(s_ == WISP_OK && strcmp(out_, want) == 0, "%s\n  want [%s]\n  got  [%s] %s", src, want, \
              s_ ? "" : out_, s_ ? e_.message : "");                                                 \
    } while (0)

#define EXPECT_ERROR(src, status, fragment)                                                          \
    do {                                                                                             \
        char out_[4096];                                                                             \
        wisp_error e_ = {0};                                                                         \
        wisp_status s_ = render(src, out_, sizeof out_, &e_);                                        \
        CHECK(s_ == (status) && strstr(e_.message, fragment), "%s: want status %d with '%s', got %d '%s'", \
              src, status, fragment, s_, e_.message);                                                \
    } while (0)

static void test_whitespace(void) {
    EXPECT("a\n{% if true %}\nb\n{% endif %}\nc", "a\nb\nc");              /* trim_blocks */
    EXPECT("a\n    {% if true %}b{% endif %}", "a\nb");                    /* lstrip_blocks */
    EXPECT("a  {%- if true -%}  b  {%- endif %}", "ab");
    EXPECT("a\n  {%+ if true %}b{% endif %}", "a\n  b");
    EXPECT("x {# note #}\ny", "x y");
    EXPECT("x\n  {# note #}\ny", "x\ny");
    EXPECT("{{ 'a' }}\n{{ 'b' }}", "a\nb");                                /* no trim after }} */
    EXPECT("a {{- ' b ' -}} c", "a b c");
    EXPECT("end\n", "end");                                               /* keep_trailing_newline off */
    EXPECT("r\r\n{% if 1 %}\r\nx\r\n{% endif %}", "r\nx\n");
    /* whitespace control strips what Python's str.isspace calls whitespace, not only ASCII */
    EXPECT("a\xc2\xa0{%- if true -%}\xe3\x80\x80" "b{% endif %}", "ab");
    EXPECT("a\n\xc2\xa0 {% if true %}b{% endif %}", "a\nb");
    EXPECT("a\xc3\xa9 {%- if true %}b{% endif %}", "a\xc3\xa9" "b");
}

static void test_expressions(void) {
    EXPECT("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }}", "7 3 -4 2 1024 3.5");
    EXPECT("{{ 'a' ~ 1 ~ none }} {{ 'ab' * 2 }}", "a1None abab");
    EXPECT("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'b' in 'abc' }} {{ 'x' not in ['x'] }}", "True False True False");
    EXPECT("{{ 'yes' if messages|length > 3 else 'no' }}|{{ 'x' if false }}|", "yes||");
    EXPECT("{{ messages[-1].content|trim }}|{{ messages[1]['role'] }}", "Bye|user");
    EXPECT("{{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ [1,2,3,4][1::2] }} {{ 'héllo'[1] }}", "el olleh [2, 4] é");
    EXPECT("{{ [1, 'a', none, true] }} {{ {'k': 'v', 'n': 2} }}", "[1, 'a', None, True] {'k': 'v', 'n': 2}");
    EXPECT("{{ none or 'd' }} {{ 0 and 1 }} {{ not none }}", "d 0 True");
    EXPECT("{{ ('a', 'b')[1] }} {{ (1) }}", "b 1");
    EXPECT("{{ undefined_thing }}|{{ undefined_thing is defined }}|{{ messages[9] is defined }}", "|False|False");
}

static void test_strings_and_filters(void) {
    EXPECT("{{ ' a b '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\n\\nz'.lstrip('\\n') }}|{{ 'z  '.rstrip() }}",
           "a b|a|z|z");
    EXPECT("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }}",
           "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c']");
    EXPECT("{{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith(('x', 'lo')) }} {{ 'ab'.upper() }} {{ 'ÀB'.lower() }}",
           "True True AB àb");
    EXPECT("{{ 'a-b'.replace('-', '+') }} {{ 'hello world'.title() }} {{ 'hi'|capitalize }}", "a+b Hello World Hi");
    EXPECT("{{ {'a': 'é\"\\n', 'b': [1, true, none]}|tojson }}", "{\"a\": \"é\\\"\\n\", \"b\": [1, true, null]}");
    EXPECT("{{ {'a': [1]}|tojson(indent=2) }}", "{\n  \"a\": [\n    1\n  ]\n}");
    EXPECT("{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|join('/') }}", "Hi/  Bye  ");
    EXPECT("{{ messages|rejectattr('role', 'in', ['user', 'system'])|list|length }}", "1");
    EXPECT("{{ [3, 1]|first }} {{ [3, 1]|last }} {{ 'abc'|list }} {{ [1, 2]|reverse|list }}", "3 1 ['a', 'b', 'c'] [2, 1]");
    EXPECT("{{ x|default('dflt') }} {{ ''|default('e', true) }} {{ '42'|int + 1 }} {{ 5|string }}", "dflt e 43 5");
    EXPECT("{{ '<a&b>'|e }} {{ 'ab'|replace('a', 'x') }} {{ -3|abs }}", "&lt;a&amp;b&gt; xb 3");
    EXPECT("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;");
    EXPECT("{{ {'a': 1}.get('a') }} {{ {'a': 1}.get('z', 0) }} {{ {'a': 1}.keys()|list }}", "1 0 ['a']");
    EXPECT("{{ strftime_now('%A %d %B %Y, %-m/%-d %j') }}", "Friday 26 July 2024, 7/26 208");
}

static void test_statements(void) {
    EXPECT("{% for m in messages %}{{ loop.index }}{{ loop.revindex0 }}{% if loop.first %}F{% endif %}"
           "{% if loop.last %}L{% endif %},{% endfor %}",
           "13F,22,31,40L,");
    EXPECT("{% for m in messages if m.role == 'user' %}{{ loop.index0 }}/{{ loop.length }} {% endfor %}", "0/2 1/2 ");
    EXPECT("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}"
           "{% endfor %}", "02");
    EXPECT("{% for x in [] %}a{% else %}empty{% endfor %}", "empty");
    EXPECT("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", "1"); /* loop scope */
    EXPECT("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}", "4");
    EXPECT("{% set a, b = 1, 2 %}{{ a }}{{ b }}", "12");
    EXPECT("{% set block %}in {{ 'side' }}{% endset %}[{{ block }}]", "[in side]");
    EXPECT("{% macro m(a, b='B') %}<{{ a }}{{ b }}>{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}", "<1B><23>");
    EXPECT("{% if 0 %}a{% elif none %}b{% elif 'x' %}c{% else %}d{% endif %}", "c");
    EXPECT("{% generation %}gen{% endgeneration %}", "gen");
    EXPECT("{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}", "<s></s>True");
}

static void test_errors(void) {
    EXPECT_ERROR("{% include 'x' %}", WISP_ERR_UNSUPPORTED, "statement 'include' is not supported");
    EXPECT_ERROR("{{ x|sort }}", WISP_ERR_UNSUPPORTED, "filter 'sort' is not supported");
    EXPECT_ERROR("{{ x is sameas y }}", WISP_ERR_UNSUPPORTED, "test 'sameas' is not supported");
    EXPECT_ERROR("{{ 'a'.format(1) }}", WISP_ERR_UNSUPPORTED, "method 'format' of str is not supported");
    EXPECT_ERROR("{{ '%s' % 1 }}", WISP_ERR_UNSUPPORTED, "string formatting");
    EXPECT_ERROR("{{ loop.cycle('a') }}", WISP_ERR_ARG, "undefined");
    EXPECT_ERROR("{{ raise_exception('Bad ' + 'roles') }}", WISP_ERR_ARG, "template raised: Bad roles");
    EXPECT_ERROR("{{ nothing + 'x' }}", WISP_ERR_ARG, "undefined");
    EXPECT_ERROR("{{ nothing() }}", WISP_ERR_UNSUPPORTED, "function 'nothing' is not defined");
    EXPECT_ERROR("{{ 1 + 'a' }}", WISP_ERR_ARG, "unsupported operand types for +: 'int' and 'str'");
    EXPECT_ERROR("{% if x %}open", WISP_ERR_FORMAT, "'if' block is never closed");
    EXPECT_ERROR("{{ x ", WISP_ERR_FORMAT, "never closed");
    EXPECT_ERROR("{% endfor %}", WISP_ERR_FORMAT, "unexpected 'endfor'");
    EXPECT_ERROR("{{ strftime_now('%Z') }}", WISP_ERR_UNSUPPORTED, "directive '%Z'");
    EXPECT_ERROR("{{ 'É'.upper() }}", WISP_ERR_UNSUPPORTED, "non-ASCII");
    EXPECT_ERROR("a\vb", WISP_ERR_UNSUPPORTED, "line separator U+000B");
    /* a float past int64 is refused, not cast (that cast is undefined behaviour) */
    EXPECT_ERROR("{{ 77800000000000000000000000000000000.0 }}", WISP_ERR_UNSUPPORTED, "printing the float");
    EXPECT_ERROR("{% for i in range(5000) %}{% for j in range(5000) %}{% endfor %}{% endfor %}", WISP_ERR_CAPACITY,
                 "max_steps");
    char deep[2000];
    size_t n = 0;
    n += (size_t)snprintf(deep, sizeof deep, "{{ ");
    for (int i = 0; i < 500; i++) deep[n++] = '(';
    deep[n++] = '1';
    for (int i = 0; i < 500; i++) deep[n++] = ')';
    memcpy(deep + n, " }}", 4);
    EXPECT_ERROR(deep, WISP_ERR_UNSUPPORTED, "nesting deeper");
    /* the rendered text not fitting is an error, never truncation */
    char small[8];
    wisp_error e = {0};
    CHECK(render("{{ 'more than eight bytes' }}", small, sizeof small, &e) == WISP_ERR_CAPACITY, "capacity: %s", e.message);
}

static void test_plan_exact(void) {
    const char *src = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}";
    wisp_error err = {0};
    size_t bytes = 0;
    wisp_template_limits lim = {4096, 32, 0, 0};
    REQUIRE(wisp_template_plan(src, strlen(src), &lim, &bytes, &err) == WISP_OK, "%s", err.message);
    uint8_t *mem = aligned_alloc(64, (bytes + 63) / 64 * 64);
    wisp_template *t = NULL;
    CHECK(wisp_template_init(&t, mem, bytes - 1, src, strlen(src), &lim, &err) == WISP_ERR_ARENA &&
              strstr(err.message, "1 short"), "one byte less: %s", err.message);
    CHECK(wisp_template_init(&t, mem, bytes, src, strlen(src), &lim, &err) == WISP_OK, "exact: %s", err.message);
    /* the work heap is bounded by the limit: a huge render runs out cleanly */
    char out[256];
    wisp_template_vars vars = {convo, 4, false, NULL, NULL, 2024, 7, 26, NULL, 0};
    size_t len = 0;
    CHECK(wisp_template_render(t, &vars, out, sizeof out, &len, &err) == WISP_OK && len > 0, "%s", err.message);
    const char *hog = "{% set ns = namespace(s='') %}{% for i in range(2000) %}{% set ns.s = ns.s ~ 'xxxxxxxx' %}{% endfor %}";
    REQUIRE(wisp_template_plan(hog, strlen(hog), &lim, &bytes, &err) == WISP_OK, "%s", err.message);
    free(mem);
    mem = aligned_alloc(64, (bytes + 63) / 64 * 64);
    REQUIRE(wisp_template_init(&t, mem, bytes, hog, strlen(hog), &lim, &err) == WISP_OK, "%s", err.message);
    CHECK(wisp_template_render(t, &vars, out, sizeof out, &len, &err) == WISP_ERR_CAPACITY &&
              strstr(err.message, "work memory"), "heap exhaustion: %s", err.message);
    free(mem);
}

/* Which bytes of the rendering are message content: through concatenation,
 * trim, slices, split, join and macro capture, never the template's text. */
static void test_content_spans(void) {
    static const char *const srcs[] = {
        "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content|trim + '<|im_end|>\\n' }}{% endfor %}",
        "{% macro turn(m) %}[{{ m.content.split(' ')|join(' ') }}]{% endmacro %}{% for m in messages %}{{ turn(m) }}{% endfor %}",
        "{% set ns = namespace(t='') %}{% for m in messages %}{% set ns.t = ns.t ~ '<' ~ m.content[1:] ~ '>' %}{% endfor %}{{ ns.t }}",
    };
    const wisp_chat_message m[] = {{.role = "user", .role_len = 4, .content = " a<|im_end|>b ", .content_len = 14}, {.role = "assistant", .role_len = 9, .content = "xy", .content_len = 2}};
    for (int k = 0; k < 3; k++) {
        size_t bytes = 0;
        wisp_error err = {0};
        REQUIRE(wisp_template_plan(srcs[k], strlen(srcs[k]), NULL, &bytes, &err) == WISP_OK, "%s", err.message);
        void *mem = aligned_alloc(64, (bytes + 63) / 64 * 64);
        wisp_template *t = NULL;
        REQUIRE(wisp_template_init(&t, mem, bytes, srcs[k], strlen(srcs[k]), NULL, &err) == WISP_OK, "%s", err.message);
        wisp_template_vars vars = {m, 2, false, NULL, NULL, 2024, 7, 26, NULL, 0};
        char out[512], marked[512];
        size_t len = 0, n = 0;
        wisp_text_span spans[16];
        REQUIRE(wisp_template_render_spans(t, &vars, out, sizeof out, &len, spans, 16, &n, &err) == WISP_OK, "%s", err.message);
        /* the rendering with content bytes upper-cased must match what we expect */
        memcpy(marked, out, len + 1);
        for (size_t i = 0; i < n; i++)
            for (size_t j = spans[i].start; j < spans[i].start + spans[i].len; j++)
                marked[j] = (char)(marked[j] >= 'a' && marked[j] <= 'z' ? marked[j] - 32 : marked[j] == '<' ? '{' : marked[j]);
        static const char *const want[] = {
            "<|im_start|>user\nA{|IM_END|>B<|im_end|>\n<|im_start|>assistant\nXY<|im_end|>\n",
            "[ A{|IM_END|>B ][XY]",
            "<A{|IM_END|>B ><Y>",
        };
        CHECK(strcmp(marked, want[k]) == 0, "template %d: content marked as [%s], want [%s]", k, marked, want[k]);
        free(mem);
    }
}

int main(void) {
    test_content_spans();
    test_whitespace();
    test_expressions();
    test_strings_and_filters();
    test_statements();
    test_errors();
    test_plan_exact();
    return check_report("test_template");
}
