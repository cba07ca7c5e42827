/* compare_grad REFERENCE.json CANDIDATE.json [--loss-tol L] [--grad-tol G]
 * Both files in the schema of ../shared/golden/grad. Checks the tokens are
 * the same, |loss - ref| <= L |ref| (default 1e-5), and for every tensor of
 * the reference, max |dA - ref| <= G max |ref dA| and the same for dB
 * (default 1e-4). Prints the loss error, the worst tensor and its error;
 * exit 0 when everything is within tolerance. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_file.h"

/* max |a - b| and max |b| over two same-shaped nested arrays; false if shapes differ */
static bool diff(const wisp_json *ja, int64_t a, const wisp_json *jb, int64_t b, double *max_err, double *max_ref) {
    if (a < 0 || b < 0) return false;
    if (wisp_json_is(jb, b, WISP_JSON_ARRAY)) {
        if (!wisp_json_is(ja, a, WISP_JSON_ARRAY) || ja->nodes[a].count != jb->nodes[b].count) return false;
        for (int64_t x = wisp_json_first(ja, a), y = wisp_json_first(jb, b); y >= 0;
             x = wisp_json_next(ja, x), y = wisp_json_next(jb, y))
            if (!diff(ja, x, jb, y, max_err, max_ref)) return false;
        return true;
    }
    double va, vb;
    if (!wisp_json_number(ja, a, &va) || !wisp_json_number(jb, b, &vb)) return false;
    if (fabs(va - vb) > *max_err || isnan(va)) *max_err = isnan(va) ? INFINITY : fabs(va - vb);
    if (fabs(vb) > *max_ref) *max_ref = fabs(vb);
    return true;
}

/* the comparison, printed; 0 when everything is within tolerance */
static int compare(const wisp_json *ref, const wisp_json *cand, double loss_tol, double grad_tol) {
    double e_tok = 0, r_tok = 0, lr, lc;
    if (!diff(cand, wisp_json_get(cand, 0, "tokens"), ref, wisp_json_get(ref, 0, "tokens"), &e_tok, &r_tok) || e_tok != 0) {
        fprintf(stderr, "the token lists differ\n");
        return 1;
    }
    if (!wisp_json_number(ref, wisp_json_get(ref, 0, "loss"), &lr) ||
        !wisp_json_number(cand, wisp_json_get(cand, 0, "loss"), &lc)) {
        fprintf(stderr, "a loss is missing\n");
        return 1;
    }
    double loss_err = fabs(lc - lr) / fabs(lr), worst = 0;
    char worst_name[160] = "none";
    int failures = loss_err <= loss_tol ? 0 : 1, tensors = 0;
    int64_t rl = wisp_json_get(ref, 0, "lora"), cl = wisp_json_get(cand, 0, "lora");
    for (int64_t k = wisp_json_first(ref, rl); k >= 0; k = wisp_json_next(ref, wisp_json_next(ref, k))) {
        char name[128];
        wisp_json_string(ref, k, name, sizeof name);
        int64_t rv = wisp_json_next(ref, k), cv = wisp_json_get(cand, cl, name);
        for (int g = 0; g < 2; g++) {
            const char *field = g ? "dB" : "dA";
            double err = 0, top = 0;
            if (cv < 0 || !diff(cand, wisp_json_get(cand, cv, field), ref, wisp_json_get(ref, rv, field), &err, &top)) {
                fprintf(stderr, "%s.%s: missing or shaped differently\n", name, field);
                failures++;
                continue;
            }
            double rel = top > 0 ? err / top : err;
            tensors++;
            if (rel > worst || isnan(rel)) {
                worst = isnan(rel) ? INFINITY : rel;
                snprintf(worst_name, sizeof worst_name, "%s.%s", name, field);
            }
            if (!(rel <= grad_tol)) {
                fprintf(stderr, "%s.%s: max error %.3g of max |value| %.3g (relative %.3g > %.3g)\n", name, field, err,
                        top, rel, grad_tol);
                failures++;
            }
        }
    }
    printf("loss %.9g vs %.9g (relative error %.2e, tol %.0e); %d gradient tensors, worst %s at %.2e (tol %.0e)\n", lc,
           lr, loss_err, loss_tol, tensors, worst_name, worst, grad_tol);
    return failures || tensors == 0 ? 1 : 0;
}

int main(int argc, char **argv) {
    double loss_tol = 1e-5, grad_tol = 1e-4;
    if (argc < 3) {
        fprintf(stderr, "usage: compare_grad REFERENCE.json CANDIDATE.json [--loss-tol L] [--grad-tol G]\n");
        return 2;
    }
    for (int i = 3; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--loss-tol") == 0) loss_tol = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--grad-tol") == 0) grad_tol = atof(argv[i + 1]);
    }
    wisp_json ref, cand;
    if (!json_file_load_pair(argv[1], &ref, argv[2], &cand)) return 1;
    int rc = compare(&ref, &cand, loss_tol, grad_tol);
    json_file_free(&ref);
    json_file_free(&cand);
    return rc;
}
