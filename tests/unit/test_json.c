/* The strict JSON reader and the writer. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "json.h"

static wisp_json_node nodes[256];

static wisp_status parse(wisp_json *j, const char *s, wisp_error *err) {
    return wisp_json_parse(j, s, strlen(s), nodes, 256, NULL, err);
}

static void test_valid(void) {
    wisp_json j;
    wisp_error err = {0};
    const char *doc = "{\"r\": 8, \"alpha\": 16.5, \"mods\": [\"q_proj\", \"v\\u00e9\\ud83d\\ude00\"], \"on\": true,"
                      " \"none\": null, \"neg\": -1.5e-3, \"nested\": {\"a\": [[], {}]}, \"esc\": \"a\\\"b\\\\c\\n\"}";
    REQUIRE(parse(&j, doc, &err) == WISP_OK, "%s", err.message);
    int64_t v;
    double d;
    bool b;
    CHECK(wisp_json_int(&j, wisp_json_get(&j, 0, "r"), &v) && v == 8, "r");
    CHECK(wisp_json_number(&j, wisp_json_get(&j, 0, "alpha"), &d) && d == 16.5, "alpha");
    CHECK(wisp_json_number(&j, wisp_json_get(&j, 0, "neg"), &d) && d == -1.5e-3, "neg %g", d);
    CHECK(!wisp_json_int(&j, wisp_json_get(&j, 0, "alpha"), &v), "16.5 is not an int");
    CHECK(wisp_json_bool(&j, wisp_json_get(&j, 0, "on"), &b) && b, "on");
    CHECK(wisp_json_is(&j, wisp_json_get(&j, 0, "none"), WISP_JSON_NULL), "null");
    CHECK(wisp_json_get(&j, 0, "missing") == -1, "missing key");
    int64_t mods = wisp_json_get(&j, 0, "mods");
    CHECK(j.nodes[mods].count == 2, "mods count");
    char buf[64];
    size_t n = wisp_json_string(&j, wisp_json_at(&j, mods, 1), buf, sizeof buf);
    CHECK(n == 7 && memcmp(buf, "v\xc3\xa9\xf0\x9f\x98\x80", 7) == 0, "unicode escapes: %zu", n);
    CHECK(wisp_json_string_eq(&j, wisp_json_at(&j, mods, 0), "q_proj"), "string_eq");
    wisp_json_string(&j, wisp_json_get(&j, 0, "esc"), buf, sizeof buf);
    CHECK(strcmp(buf, "a\"b\\c\n") == 0, "escapes");
    int64_t nested = wisp_json_get(&j, 0, "nested");
    int64_t a = wisp_json_get(&j, nested, "a");
    CHECK(j.nodes[a].count == 2 && wisp_json_next(&j, a) == -1, "a is the last value of nested");
    CHECK(wisp_json_next(&j, nested) == wisp_json_get(&j, 0, "esc") - 1, "subtree skip");
    int64_t last = wisp_json_at(&j, mods, 1);
    CHECK(wisp_json_next(&j, last) == -1, "iteration stops at the end of its array");
    CHECK(wisp_json_next(&j, wisp_json_first(&j, a)) == wisp_json_at(&j, a, 1), "sibling inside nested array");
    /* a record with a fixed set of keys: values land by name, absent ones stay, the first stranger is named */
    static const char *const picked[3] = {"on", "r", "absent"};
    int64_t value_of[3] = {-1, -1, -1};
    char stranger[4];
    CHECK(!wisp_json_pick(&j, nested, picked, 3, value_of, stranger, sizeof stranger) && strcmp(stranger, "a") == 0,
          "nested's only key is a stranger");
    CHECK(!wisp_json_pick(&j, 0, picked, 3, value_of, stranger, sizeof stranger) && strcmp(stranger, "alp") == 0,
          "the first key not picked is alpha, cut to the buffer: %s", stranger);
    CHECK(value_of[1] == wisp_json_get(&j, 0, "r") && value_of[0] == -1 && value_of[2] == -1,
          "keys before the stranger are picked, later ones not yet");
    static const char *const all[8] = {"r", "alpha", "mods", "on", "none", "neg", "nested", "esc"};
    int64_t every[8];
    CHECK(wisp_json_pick(&j, 0, all, 8, every, stranger, sizeof stranger), "no stranger when every key is named");
    for (int k = 0; k < 8; k++) CHECK(every[k] == wisp_json_get(&j, 0, all[k]), "value of %s", all[k]);
    /* numbers */
    const char *nums[] = {"0", "-0", "1e308", "2.2250738585072014e-308", "123456789012345678901234567890", "0.1"};
    const double want[] = {0, -0.0, 1e308, 2.2250738585072014e-308, 1.2345678901234568e29, 0.1};
    for (int i = 0; i < 6; i++) {
        REQUIRE(parse(&j, nums[i], &err) == WISP_OK, "%s: %s", nums[i], err.message);
        CHECK(wisp_json_number(&j, 0, &d) && fabs(d - want[i]) <= fabs(want[i]) * 1e-15, "%s -> %.17g", nums[i], d);
    }
    /* sizing call */
    size_t need = 0;
    CHECK(wisp_json_parse(&j, "[1,2,[3]]", 9, NULL, 0, &need, &err) == WISP_ERR_CAPACITY && need == 5, "need %zu", need);
}

static void test_invalid(void) {
    const char *bad[] = {"", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "[01]", "[1.]", "[.5]", "[1e]", "\"\\x\"",
                         "\"a", "[\"\x01\"]", "{\"a\":1,\"a\":2}", "tru", "[1] 2", "\"\xff\"", "\"\xc0\xaf\"",
                         "[\"\\u12\"]", "{1:2}", "nul", "[-]", "\"\xed\xa0\x80\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        wisp_json j;
        wisp_error err = {0};
        CHECK(parse(&j, bad[i], &err) == WISP_ERR_FORMAT, "'%s' should be rejected", bad[i]);
        CHECK(strstr(err.message, "line") != NULL, "'%s': message has a position: %s", bad[i], err.message);
    }
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    wisp_json j;
    wisp_error err = {0};
    CHECK(wisp_json_parse(&j, deep, 200, nodes, 256, NULL, &err) == WISP_ERR_FORMAT && strstr(err.message, "deep"),
          "deep nesting: %s", err.message);
}

static void test_writer(void) {
    char buf[512];
    wisp_json_writer w;
    wisp_jw_init(&w, buf, sizeof buf, false);
    wisp_jw_begin_object(&w);
    wisp_jw_key(&w, "r");
    wisp_jw_int(&w, 8);
    wisp_jw_key(&w, "alpha");
    wisp_jw_double(&w, 16.0, 9);
    wisp_jw_key(&w, "lr");
    wisp_jw_double(&w, 0.0002, 9);
    wisp_jw_key(&w, "t");
    wisp_jw_begin_array(&w);
    wisp_jw_string(&w, "q\"\n");
    wisp_jw_bool(&w, false);
    wisp_jw_null(&w);
    wisp_jw_end_array(&w);
    wisp_jw_end_object(&w);
    CHECK(wisp_jw_finish(&w), "finish");
    CHECK(strcmp(buf, "{\"r\":8,\"alpha\":16.0,\"lr\":0.0002,\"t\":[\"q\\\"\\n\",false,null]}") == 0, "got %s", buf);
    wisp_json j;
    wisp_error err = {0};
    CHECK(parse(&j, buf, &err) == WISP_OK, "writer output parses: %s", err.message);
    wisp_jw_init(&w, buf, 8, true);
    wisp_jw_begin_array(&w);
    wisp_jw_string(&w, "long enough to overflow");
    wisp_jw_end_array(&w);
    CHECK(!wisp_jw_finish(&w) && w.len > 8 && strlen(buf) == 7, "overflow is reported, len %zu", w.len);
}

int main(void) {
    test_valid();
    test_invalid();
    test_writer();
    return check_report("test_json");
}
