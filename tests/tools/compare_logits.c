/* compare_logits REFERENCE.json CANDIDATE.json --tol T [--greedy-exact]
 * Both files in the schema of the files in ../shared/golden/logits. Checks that
 * prompts and tokens are identical and that the relative RMS error of the
 * candidate's logits (over all positions of a case) is at most T. Prints one
 * line per case; exit 0 when all pass. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_file.h"

static size_t ints(const wisp_json *j, int64_t arr, int32_t *out, size_t cap) {
    size_t n = 0;
    for (int64_t e = wisp_json_first(j, arr); e >= 0 && n < cap; e = wisp_json_next(j, e)) {
        int64_t v = 0;
        wisp_json_int(j, e, &v);
        out[n++] = (int32_t)v;
    }
    return n;
}

/* the comparison, one line per case; 0 when every case passes */
static int compare(const wisp_json *ref, const wisp_json *cand, double tol, bool greedy_exact) {
    int64_t rc = wisp_json_get(ref, 0, "cases"), cc = wisp_json_get(cand, 0, "cases");
    if (rc < 0 || cc < 0 || ref->nodes[rc].count != cand->nodes[cc].count) {
        fprintf(stderr, "case lists differ\n");
        return 1;
    }
    int failures = 0;
    int64_t a = wisp_json_first(ref, rc), b = wisp_json_first(cand, cc);
    for (int k = 0; a >= 0 && b >= 0; k++, a = wisp_json_next(ref, a), b = wisp_json_next(cand, b)) {
        int32_t ta[4096], tb[4096];
        size_t na = ints(ref, wisp_json_get(ref, a, "tokens"), ta, 4096);
        size_t nb = ints(cand, wisp_json_get(cand, b, "tokens"), tb, 4096);
        if (na != nb || memcmp(ta, tb, na * sizeof *ta)) {
            printf("case %d: tokens differ\n", k);
            failures++;
            continue;
        }
        double num = 0, den = 0, max_abs = 0;
        int64_t ra = wisp_json_get(ref, a, "logits"), rb = wisp_json_get(cand, b, "logits");
        size_t positions = 0, mismatched_argmax = 0;
        for (int64_t pa = wisp_json_first(ref, ra), pb = wisp_json_first(cand, rb); pa >= 0 && pb >= 0;
             pa = wisp_json_next(ref, pa), pb = wisp_json_next(cand, pb), positions++) {
            double best_a = -INFINITY, best_b = -INFINITY;
            int arg_a = -1, arg_b = -1, i = 0;
            for (int64_t x = wisp_json_first(ref, pa), y = wisp_json_first(cand, pb); x >= 0 && y >= 0;
                 x = wisp_json_next(ref, x), y = wisp_json_next(cand, y), i++) {
                double u = NAN, v = NAN;
                wisp_json_number(ref, x, &u);
                wisp_json_number(cand, y, &v);
                num += (u - v) * (u - v);
                den += u * u;
                if (fabs(u - v) > max_abs || v != v) max_abs = v != v ? INFINITY : fabs(u - v);
                if (u > best_a) { best_a = u; arg_a = i; }
                if (v > best_b) { best_b = v; arg_b = i; }
            }
            if (arg_a != arg_b) mismatched_argmax++;
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        int32_t ga[64], gb[64];
        size_t nga = ints(ref, wisp_json_get(ref, a, "greedy"), ga, 64);
        size_t ngb = ints(cand, wisp_json_get(cand, b, "greedy"), gb, 64);
        size_t same = 0;
        while (same < nga && same < ngb && ga[same] == gb[same]) same++;
        bool ok = rel <= tol && rel == rel && (!greedy_exact || (nga == ngb && same == nga));
        printf("case %d: %zu positions, rel RMS %.6f (tol %.4f), max abs %.5f, argmax differs at %zu, greedy "
               "agrees for %zu/%zu tokens: %s\n",
               k, positions, rel, tol, max_abs, mismatched_argmax, same, nga, ok ? "ok" : "FAIL");
        if (!ok) failures++;
    }
    return failures ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc < 5 || strcmp(argv[3], "--tol") != 0) {
        fprintf(stderr, "usage: compare_logits REFERENCE.json CANDIDATE.json --tol T [--greedy-exact]\n");
        return 2;
    }
    double tol = atof(argv[4]);
    bool greedy_exact = argc > 5 && strcmp(argv[5], "--greedy-exact") == 0;
    wisp_json ref, cand;
    if (!json_file_load_pair(argv[1], &ref, argv[2], &cand)) return 1;
    int rc = compare(&ref, &cand, tol, greedy_exact);
    json_file_free(&ref);
    json_file_free(&cand);
    return rc;
}
