/* lora_diff: compare two GGUF LoRA adapters tensor by tensor.
 *
 *   lora_diff GOT.gguf WANT.gguf [--tol REL]
 *
 * Both must adapt the same (layer, projection) pairs with the same ranks,
 * shapes, types and scales. For each A and B it prints the largest absolute
 * difference relative to WANT's largest |value| in that tensor; exit status
 * 0 when every tensor is within REL (default 0: bit-identical values), 1
 * when not, 2 on unreadable input. Used by `make test-embedded` to check the
 * training firmware's adapter against `wisp finetune`'s. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "lora_gguf.h"
#include "types.h"

typedef struct adapter {
    void *bytes;
    wisp_gguf g;
    wisp_lora lora;
    wisp_lora_pair *pairs;
} adapter;

static bool load(adapter *a, const char *path) {
    memset(a, 0, sizeof *a);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "lora_diff: cannot open %s\n", path);
        return false;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    a->bytes = malloc(n > 0 ? (size_t)n : 1);
    bool ok = a->bytes && n > 0 && fread(a->bytes, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    wisp_error err = {0};
    wisp_lora_gguf_info info;
    if (ok) ok = !wisp_gguf_open(&a->g, a->bytes, (size_t)n, &err) && !wisp_lora_gguf_plan(&a->g, &info, &err);
    if (ok) ok = (a->pairs = malloc(info.pairs_bytes + 1)) != NULL;
    if (ok) ok = !wisp_lora_gguf_read(&a->g, NULL, a->pairs, (size_t)info.n_pairs, &a->lora, &err);
    if (!ok) fprintf(stderr, "lora_diff: %s: %s\n", path, err.message[0] ? err.message : "unreadable");
    return ok;
}

static float element(const void *p, int32_t type, size_t i) {
    const uint8_t *b = p;
    if (type == WISP_TYPE_F32) return wisp_load_f32(b + 4 * i);
    if (type == WISP_TYPE_F16) return wisp_f16_to_f32(wisp_load_u16(b + 2 * i));
    return wisp_bf16_to_f32(wisp_load_u16(b + 2 * i));
}

/* Largest |got - want| over the tensor, relative to its largest |want|. */
static double rel_diff(const void *got, const void *want, int32_t type, size_t n, bool *identical) {
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        float x = element(got, type, i), y = element(want, type, i);
        if (wisp_f32_bits(x) != wisp_f32_bits(y)) *identical = false;
        double d = fabs((double)x - (double)y);
        if (!(d <= diff)) diff = d; /* NaN propagates */
        if (fabs((double)y) > scale) scale = fabs((double)y);
    }
    return scale > 0 ? diff / scale : diff;
}

int main(int argc, char **argv) {
    double tol = 0;
    if (argc == 5 && strcmp(argv[3], "--tol") == 0) tol = atof(argv[4]);
    else if (argc != 3) {
        fprintf(stderr, "usage: lora_diff GOT.gguf WANT.gguf [--tol REL]\n");
        return 2;
    }
    adapter got, want;
    if (!load(&got, argv[1]) || !load(&want, argv[2])) return 2;
    if (got.lora.n_pairs != want.lora.n_pairs) {
        printf("different pairs: %d vs %d\n", got.lora.n_pairs, want.lora.n_pairs);
        return 1;
    }
    double worst = 0;
    bool identical = true;
    for (int32_t i = 0; i < want.lora.n_pairs; i++) {
        const wisp_lora_pair *p = &got.lora.pairs[i], *q = &want.lora.pairs[i];
        if (p->layer != q->layer || p->proj != q->proj || p->rank != q->rank || p->n_in != q->n_in ||
            p->n_out != q->n_out || p->type != q->type || p->scale != q->scale) {
            printf("pair %d differs in layer/projection/rank/shape/type/scale\n", i);
            return 1;
        }
        double da = rel_diff(p->a, q->a, q->type, (size_t)q->rank * (size_t)q->n_in, &identical);
        double db = rel_diff(p->b, q->b, q->type, (size_t)q->n_out * (size_t)q->rank, &identical);
        printf("blk.%d.%s: A %.3g  B %.3g\n", q->layer, wisp_proj_gguf_name(q->proj), da, db);
        if (!(da <= worst)) worst = da;
        if (!(db <= worst)) worst = db;
    }
    printf("%s: %d pairs, largest relative difference %.3g (tolerance %.3g)\n",
           identical ? "bit-identical" : "different bits", want.lora.n_pairs, worst, tol);
    return worst <= tol ? 0 : 1;
}
