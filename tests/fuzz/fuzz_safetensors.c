/* libFuzzer harness: arbitrary bytes as a safetensors file. Size the index,
 * open it in exactly the planned memory, read every tensor (first and last
 * data byte), look each one up by name, read metadata, and write the same
 * table back as a header (the writer must accept what the reader accepted,
 * or refuse it with an error, never crash). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "safetensors.h"

#define MAX_WRITTEN 256

static volatile uint8_t touched;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wisp_st_plan plan;
    wisp_error err;
    if (wisp_st_plan_memory(data, size, &plan, &err)) return 0;
    void *mem = fuzz_exact(plan.bytes);
    wisp_safetensors st;
    if (wisp_st_open(&st, data, size, mem, plan.bytes, &err) == WISP_OK) {
        static wisp_st_out_tensor out[MAX_WRITTEN];
        static char names[MAX_WRITTEN][128];
        size_t n_out = 0;
        for (size_t i = 0; i < st.n_tensors; i++) {
            wisp_st_tensor t, again;
            wisp_st_tensor_at(&st, i, &t);
            if (t.nbytes) touched ^= t.data[0] ^ t.data[t.nbytes - 1];
            char name[128];
            if (t.name_len < sizeof name) {
                memcpy(name, t.name, t.name_len);
                name[t.name_len] = 0;
                /* a name with a NUL inside cannot be looked up as a C string */
                if (strlen(name) == t.name_len && (!wisp_st_find(&st, name, &again) || again.data != t.data)) abort();
                if (n_out < MAX_WRITTEN) {
                    memcpy(names[n_out], name, t.name_len + 1);
                    wisp_st_out_tensor *o = &out[n_out++];
                    o->name = names[n_out - 1];
                    o->dtype = t.dtype;
                    o->n_dims = t.n_dims;
                    memcpy(o->shape, t.shape, sizeof o->shape);
                }
            }
        }
        char buf[64];
        (void)wisp_st_metadata(&st, "format", buf, sizeof buf);
        (void)wisp_st_metadata(&st, "x", buf, 1);
        wisp_sink count = wisp_count_sink_make();
        (void)wisp_st_write_header(&count, out, n_out, NULL, 0, &err);
    }
    free(mem);
    return 0;
}
