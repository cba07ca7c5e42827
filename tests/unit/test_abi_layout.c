/* The layout table the wasm ABI exports (wasm/abi_layout.c), compiled
 * natively from the same structs (wasm/abi_structs.h), is one JS can trust:
 *  - every byte of every record belongs to exactly one field (so no member
 *    was left out of the table, and no two fields overlap);
 *  - each field's type names an element size that times its element count
 *    is the field's size;
 *  - names are unique within a record, and the plan's part array has one
 *    element per wisp_part, named as core names them;
 *  - out-of-range indices answer "" / -1 instead of reading past the table.
 * The records hold no pointers or size_t, so this layout is wasm32's too;
 * web/test/test_abi_layout.mjs checks the JS side against the same table. */
#include "check.h"

#include <stdio.h>
#include <string.h>

#include "wasm/abi_layout.c"

static int32_t type_size(const char *type) {
    if (!strcmp(type, "i32") || !strcmp(type, "u32") || !strcmp(type, "f32")) return 4;
    if (!strcmp(type, "f64")) return 8;
    if (!strcmp(type, "char")) return 1;
    return 0;
}

static void check_record(int32_t r) {
    const char *rec = ww_record_name(r);
    int32_t size = ww_record_size(r);
    REQUIRE(size > 0 && size <= 1 << 16, "record %s has size %d", rec, size);
    unsigned char owner[1 << 16];
    memset(owner, 0, (size_t)size);
    int32_t fields_in = 0;
    for (int32_t i = 0; i < ww_field_count(); i++) {
        if (ww_field_record(i) != r) continue;
        fields_in++;
        const char *name = ww_field_name(i), *type = ww_field_type(i);
        int32_t off = ww_field_offset(i), bytes = ww_field_size(i), n = ww_field_elements(i);
        CHECK(type_size(type) > 0, "%s.%s has an unknown type '%s'", rec, name, type);
        CHECK(n >= 1 && type_size(type) * n == bytes, "%s.%s: %d elements of %s are not %d bytes", rec, name, n, type,
              bytes);
        CHECK(off % (type_size(type) ? type_size(type) : 1) == 0, "%s.%s at %d is not aligned for %s", rec, name, off,
              type);
        REQUIRE(off >= 0 && bytes > 0 && off + bytes <= size, "%s.%s [%d, %d) lies outside the record's %d bytes", rec,
                name, off, off + bytes, size);
        for (int32_t b = off; b < off + bytes; b++) {
            CHECK(owner[b] == 0, "%s.%s overlaps another field at byte %d", rec, name, b);
            owner[b] = 1;
        }
        for (int32_t j = 0; j < i; j++)
            CHECK(ww_field_record(j) != r || strcmp(ww_field_name(j), name) != 0, "%s.%s is listed twice", rec, name);
    }
    CHECK(fields_in > 0, "record %s has no fields", rec);
    int32_t unnamed = 0;
    for (int32_t b = 0; b < size; b++) unnamed += owner[b] == 0;
    CHECK(unnamed == 0, "%d bytes of record %s (%d bytes) belong to no field: a member is missing from the table", unnamed,
          rec, size);
}

static int32_t find(const char *rec, const char *name) {
    for (int32_t i = 0; i < ww_field_count(); i++)
        if (!strcmp(ww_record_name(ww_field_record(i)), rec) && !strcmp(ww_field_name(i), name)) return i;
    return -1;
}

/* The table's figures are the structs' own (spot checks by name). */
static void check_named_fields(void) {
    int32_t part = find("plan", "part");
    REQUIRE(part >= 0, "plan.part is in the table");
    CHECK(ww_field_offset(part) == (int32_t)offsetof(ww_plan_figures, part), "plan.part offset");
    CHECK(ww_field_elements(part) == WISP_PART_COUNT, "plan.part has %d elements, not WISP_PART_COUNT %d",
          ww_field_elements(part), WISP_PART_COUNT);
    for (int32_t p = 0; p < WISP_PART_COUNT; p++)
        CHECK(ww_part_name(p)[0] && !strcmp(ww_part_name(p), wisp_part_name(p)), "part %d is named '%s'", p, ww_part_name(p));
    int32_t seed = find("train", "seed_hi"), clip = find("train", "clip"), ctx = find("config", "threads");
    REQUIRE(seed >= 0 && clip >= 0 && ctx >= 0, "train.seed_hi, train.clip, config.threads are in the table");
    CHECK(ww_field_offset(seed) == (int32_t)offsetof(ww_train_in, seed_hi) && !strcmp(ww_field_type(seed), "u32"),
          "train.seed_hi: u32 at its offsetof");
    CHECK(ww_field_offset(clip) == (int32_t)offsetof(ww_train_in, clip) && !strcmp(ww_field_type(clip), "f32"),
          "train.clip: f32 at its offsetof");
    CHECK(ww_field_offset(ctx) == (int32_t)offsetof(ww_config_in, threads), "config.threads at its offsetof");
}

int main(void) {
    CHECK(ww_record_count() == 6, "6 records (config, plan, train, train_step, train_data, strings), got %d", ww_record_count());
    for (int32_t r = 0; r < ww_record_count(); r++) check_record(r);
    check_named_fields();
    /* out of range */
    CHECK(!strcmp(ww_record_name(-1), "") && ww_record_size(ww_record_count()) == -1, "records out of range");
    CHECK(!strcmp(ww_field_name(ww_field_count()), "") && ww_field_offset(-1) == -1 && ww_field_record(-1) == -1 &&
              ww_field_elements(ww_field_count()) == -1 && ww_field_size(-1) == -1 && !strcmp(ww_field_type(-1), ""),
          "fields out of range");
    CHECK(!strcmp(ww_part_name(WISP_PART_COUNT), ""), "parts out of range");
    return check_report("test_abi_layout");
}
