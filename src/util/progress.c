/* progress.c — see progress.h.  Draws at most 10 times a second on a
 * terminal and every 5 s otherwise, so reporting costs nothing next to the
 * work. */
#include "util/progress.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TTY_EVERY 0.1
#define LOG_EVERY 5.0
#define QUIET_BELOW 0.3 /* a terminal bar appears only for work longer than this */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void amount(char *out, size_t cap, lilac_progress_unit u, double x) {
    if (u == LILAC_PROGRESS_BYTES) {
        if (x >= 1e9) snprintf(out, cap, "%.2f GB", x / 1e9);
        else if (x >= 1e6) snprintf(out, cap, "%.1f MB", x / 1e6);
        else snprintf(out, cap, "%.0f kB", x / 1e3);
    } else {
        snprintf(out, cap, "%.0f", x);
    }
}

static void rate(char *out, size_t cap, lilac_progress_unit u, double per_s) {
    if (u == LILAC_PROGRESS_BYTES) snprintf(out, cap, "%.2f GB/s", per_s / 1e9);
    else if (u == LILAC_PROGRESS_TOKENS) snprintf(out, cap, "%.0f tokens/s", per_s);
    else snprintf(out, cap, "%.2f steps/s", per_s);
}

void lilac_progress_begin(lilac_progress *p, const char *label, lilac_progress_unit unit, uint64_t total, int quiet) {
    memset(p, 0, sizeof *p);
    snprintf(p->label, sizeof p->label, "%s", label);
    p->unit = unit;
    p->total = total;
    p->quiet = quiet;
    p->tty = isatty(STDERR_FILENO);
    p->t0 = p->last = now();
}

static void draw(lilac_progress *p, double t) {
    double el = t - p->t0, per_s = el > 0 ? (double)p->done / el : 0;
    char d[32], tot[32], r[32], eta[32] = "";
    amount(d, sizeof d, p->unit, (double)p->done);
    amount(tot, sizeof tot, p->unit, (double)p->total);
    rate(r, sizeof r, p->unit, per_s);
    const char *unit = p->unit == LILAC_PROGRESS_TOKENS ? " tokens" : p->unit == LILAC_PROGRESS_STEPS ? " steps" : "";
    if (p->total && per_s > 0 && p->done < p->total) snprintf(eta, sizeof eta, "  ETA %.0fs", (double)(p->total - p->done) / per_s);
    double frac = p->total ? (double)p->done / (double)p->total : 0;
    if (frac > 1) frac = 1;
    if (p->tty) {
        char bar[32];
        int w = 24, f = (int)(frac * w);
        for (int i = 0; i < w; i++) bar[i] = i < f ? '=' : i == f ? '>' : ' ';
        bar[w] = 0;
        if (p->total)
            fprintf(stderr, "\r\x1b[K%s [%s] %3.0f%%  %s/%s%s  %s%s", p->label, bar, frac * 100, d, tot, unit, r, eta);
        else
            fprintf(stderr, "\r\x1b[K%s  %s%s  %s", p->label, d, unit, r);
    } else if (p->total) {
        fprintf(stderr, "%s: %.0f%%  %s/%s%s  %s%s\n", p->label, frac * 100, d, tot, unit, r, eta);
    } else {
        fprintf(stderr, "%s: %s%s  %s\n", p->label, d, unit, r);
    }
    fflush(stderr);
    p->drawn = 1;
    p->last = t;
}

void lilac_progress_update(lilac_progress *p, uint64_t done) {
    p->done = done;
    if (p->quiet) return;
    double t = now();
    if (p->tty ? t - p->t0 >= QUIET_BELOW && t - p->last >= TTY_EVERY : t - p->last >= LOG_EVERY) draw(p, t);
}

void lilac_progress_end(lilac_progress *p) {
    if (p->quiet) return;
    double el = now() - p->t0;
    if (!p->drawn && (p->tty || el < 1.0)) return;
    char d[32], r[32];
    amount(d, sizeof d, p->unit, (double)p->done);
    rate(r, sizeof r, p->unit, el > 0 ? (double)p->done / el : 0);
    const char *unit = p->unit == LILAC_PROGRESS_TOKENS ? " tokens" : p->unit == LILAC_PROGRESS_STEPS ? " steps" : "";
    fprintf(stderr, "%s%s: %s%s in %.1f s, %s\n", p->tty ? "\r\x1b[K" : "", p->label, d, unit, el, r);
    fflush(stderr);
}

void lilac_progress_sink_cb(void *ctx, const char *stage, uint64_t done, uint64_t total) {
    lilac_progress_sink *s = ctx;
    if (!s->open || strcmp(s->stage, stage) != 0) {
        lilac_progress_sink_end(s);
        snprintf(s->stage, sizeof s->stage, "%s", stage);
        lilac_progress_begin(&s->bar, stage, LILAC_PROGRESS_BYTES, total, s->quiet);
        s->open = 1;
    }
    lilac_progress_update(&s->bar, done);
}

void lilac_progress_sink_end(lilac_progress_sink *s) {
    if (!s->open) return;
    lilac_progress_end(&s->bar);
    s->open = 0;
}
