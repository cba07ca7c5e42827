#include "train_log.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"

bool cli_log_add(cli_train_log *log, const cli_log_row *row) {
    if (log->n == log->cap) {
        size_t cap = log->cap ? log->cap * 2 : 256;
        cli_log_row *r = realloc(log->rows, cap * sizeof *r);
        if (!r) return false;
        log->rows = r;
        log->cap = cap;
    }
    log->rows[log->n++] = *row;
    return true;
}

void cli_log_truncate(cli_train_log *log, int64_t last_step) {
    while (log->n && log->rows[log->n - 1].step > last_step) log->n--;
}

void cli_log_free(cli_train_log *log) {
    free(log->rows);
    memset(log, 0, sizeof *log);
}

/* The next comma-separated field of *line as a number; NaN when empty. */
static double field(char **line, bool *present) {
    char *f = strsep(line, ",");
    *present = f != NULL;
    if (!f || !*f || *f == '\n') return NAN;
    return atof(f);
}

bool cli_log_read_csv(cli_train_log *log, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    log->n = 0;
    char buf[1024];
    bool header = true;
    while (fgets(buf, sizeof buf, f)) {
        if (header) {
            header = false;
            continue;
        }
        cli_log_row r;
        char *line = buf;
        bool got[14];
        double v[14];
        for (int i = 0; i < 14; i++) v[i] = field(&line, &got[i]);
        if (!got[4] || !isfinite(v[0])) continue;
        r.step = (int64_t)v[0];
        r.loss = v[1], r.lr = v[2], r.grad_norm = v[3], r.tokens_per_s = v[4], r.val_loss = v[5];
        r.rewards = (cli_dpo_metrics){v[6], v[7], v[8], v[9]};
        r.val_rewards = (cli_dpo_metrics){v[10], v[11], v[12], v[13]};
        cli_log_add(log, &r);
    }
    fclose(f);
    return true;
}

/* A growing text buffer for the writers. */
typedef struct text {
    char *s;
    size_t n, cap;
    bool failed;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->s ? t->s + t->n : NULL, t->s ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            t->failed = true;
            return;
        }
        if (t->s && t->n + (size_t)k < t->cap) {
            t->n += (size_t)k;
            return;
        }
        size_t cap = (t->cap + (size_t)k + 1) * 2;
        char *s = realloc(t->s, cap);
        if (!s) {
            t->failed = true;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
}

static bool finish(text *t, const char *path) {
    bool ok = !t->failed && cli_write_file_atomic(path, t->s ? t->s : "", t->n);
    if (t->failed) fprintf(stderr, "wisp: %s: out of memory\n", path);
    free(t->s);
    return ok;
}

bool cli_log_write_csv(const cli_train_log *log, const char *path) {
    text t = {0};
    put(&t, "step,loss,lr,grad_norm,tokens_per_s,val_loss%s\n",
        log->dpo ? ",rewards/chosen,rewards/rejected,rewards/accuracies,rewards/margins,eval_rewards/chosen,"
                   "eval_rewards/rejected,eval_rewards/accuracies,eval_rewards/margins" : "");
    for (size_t i = 0; i < log->n; i++) {
        const cli_log_row *r = &log->rows[i];
        put(&t, "%lld,%.6f,%.6g,%.6g,%.1f,", (long long)r->step, r->loss, r->lr, r->grad_norm, r->tokens_per_s);
        if (isfinite(r->val_loss)) put(&t, "%.6f", r->val_loss);
        if (log->dpo) {
            const cli_dpo_metrics *m[2] = {&r->rewards, &r->val_rewards};
            for (int k = 0; k < 2; k++) {
                const double v[4] = {m[k]->chosen, m[k]->rejected, m[k]->accuracies, m[k]->margins};
                for (int c = 0; c < 4; c++) {
                    put(&t, ",");
                    if (isfinite(v[c])) put(&t, "%.6f", v[c]);
                }
            }
        }
        put(&t, "\n");
    }
    return finish(&t, path);
}

/* A round number near span/5 for axis ticks. */
static double tick_step(double span) {
    double raw = span / 5, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

bool cli_log_write_svg(const cli_train_log *log, const char *path, const char *title) {
    const double W = 640, H = 400, L = 60, R = 20, T = 40, B = 50;
    double x0 = 0, x1 = 1, y0 = INFINITY, y1 = -INFINITY;
    for (size_t i = 0; i < log->n; i++) {
        const cli_log_row *r = &log->rows[i];
        if (r->step > x1) x1 = (double)r->step;
        double vals[2] = {r->loss, r->val_loss};
        for (int k = 0; k < 2; k++)
            if (isfinite(vals[k])) y0 = fmin(y0, vals[k]), y1 = fmax(y1, vals[k]);
    }
    if (!isfinite(y0)) y0 = 0, y1 = 1;
    if (y1 - y0 < 1e-6) y0 -= 0.5, y1 += 0.5;
    double pad = (y1 - y0) * 0.05;
    y0 -= pad, y1 += pad;
#define PX(v) (L + ((v) - x0) / (x1 - x0) * (W - L - R))
#define PY(v) (T + (y1 - (v)) / (y1 - y0) * (H - T - B))
    text t = {0};
    put(&t, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
    put(&t, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    put(&t, "<text x=\"%.0f\" y=\"22\" font-size=\"14\" text-anchor=\"middle\">", W / 2);
    for (const char *c = title; *c; c++) /* escape for XML */
        put(&t, "%s", *c == '<' ? "&lt;" : *c == '>' ? "&gt;" : *c == '&' ? "&amp;" : (char[2]){*c, 0});
    put(&t, "</text>\n");
    double ys = tick_step(y1 - y0), xs = tick_step(x1 - x0);
    for (double v = ceil(y0 / ys) * ys; v <= y1; v += ys)
        put(&t, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%.1f\" y=\"%.1f\" "
                "text-anchor=\"end\">%g</text>\n", L, W - R, PY(v), PY(v), L - 6, PY(v) + 4, v);
    for (double v = ceil(x0 / xs) * xs; v <= x1; v += xs)
        put(&t, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/><text x=\"%.1f\" y=\"%.1f\" "
                "text-anchor=\"middle\">%g</text>\n", PX(v), PX(v), T, H - B, PX(v), H - B + 16, v);
    put(&t, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#444\"/>\n", L, T,
        W - L - R, H - T - B);
    put(&t, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">optimizer step</text>\n", (L + W - R) / 2, H - 12);
    put(&t, "<text transform=\"translate(16 %.0f) rotate(-90)\" text-anchor=\"middle\">loss</text>\n", (T + H - B) / 2);
    const char *colors[2] = {"#1f77b4", "#d62728"}, *names[2] = {"train loss", "validation loss"};
    for (int k = 0; k < 2; k++) {
        bool any = false;
        for (size_t i = 0; i < log->n; i++) {
            double v = k ? log->rows[i].val_loss : log->rows[i].loss;
            if (!isfinite(v)) continue;
            put(&t, "%s%.1f,%.1f", any ? " " : "<polyline fill=\"none\" stroke-width=\"1.5\" points=\"", PX((double)log->rows[i].step), PY(v));
            any = true;
        }
        if (any) put(&t, "\" stroke=\"%s\"/>\n", colors[k]);
        for (size_t i = 0; k && i < log->n; i++)
            if (isfinite(log->rows[i].val_loss))
                put(&t, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", PX((double)log->rows[i].step),
                    PY(log->rows[i].val_loss), colors[k]);
        put(&t, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"2\"/><text x=\"%.0f\" "
                "y=\"%.0f\">%s</text>\n", W - R - 150, W - R - 130, T + 16 + 18.0 * k, T + 16 + 18.0 * k, colors[k],
            W - R - 124, T + 20 + 18.0 * k, names[k]);
    }
    put(&t, "</svg>\n");
#undef PX
#undef PY
    return finish(&t, path);
}
