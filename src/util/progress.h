/* progress.h — progress of long work on stderr: a one-line bar redrawn in
 * place when stderr is a terminal ("label [=====>    ] 45%  8.6/19.1 GB
 * 2.3 GB/s  ETA 5s"), plain lines every few seconds otherwise (for logs), and
 * nothing when quiet.  Work shorter than a moment prints nothing at all on a
 * terminal, and only its end line elsewhere when it took over a second. */
#ifndef LILAC_UTIL_PROGRESS_H
#define LILAC_UTIL_PROGRESS_H

#include <stdint.h>

typedef enum { LILAC_PROGRESS_BYTES, LILAC_PROGRESS_TOKENS, LILAC_PROGRESS_STEPS } lilac_progress_unit;

typedef struct {
    char label[64];
    lilac_progress_unit unit;
    uint64_t total, done;
    double t0, last;  /* monotonic seconds: start, last line drawn */
    int tty, quiet, drawn;
} lilac_progress;

/* Starts a bar (total may be 0: unknown). */
void lilac_progress_begin(lilac_progress *p, const char *label, lilac_progress_unit unit, uint64_t total, int quiet);
void lilac_progress_update(lilac_progress *p, uint64_t done);
/* Ends it: the bar is replaced by a summary line ("label: 19.1 GB in 8.2 s,
 * 2.3 GB/s") when anything was drawn, or when not a terminal and it took
 * more than a second. */
void lilac_progress_end(lilac_progress *p);

/* The engine's progress callback (lilac_engine_opts.progress) drawn as
 * bars, one per stage; ctx is a lilac_progress_sink. */
typedef struct {
    lilac_progress bar;
    char stage[64];
    int quiet, open;
} lilac_progress_sink;
void lilac_progress_sink_cb(void *ctx, const char *stage, uint64_t done, uint64_t total);
void lilac_progress_sink_end(lilac_progress_sink *s);

#endif
