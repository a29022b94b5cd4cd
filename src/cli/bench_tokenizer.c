/* bench_tokenizer.c — `lilac bench tokenizer`: tokenizer.json load time and
 * single-threaded encode throughput.
 *
 *   lilac bench tokenizer --model DIR [--file TEXT] [--seconds S] [--loads N]
 *
 * Load: N full loads (read + parse + build), min and median in ms.
 * Encode: the text is encoded over and over on one thread for S seconds;
 * reported three ways: the first pass on a freshly loaded tokenizer (empty
 * word cache), the steady state (warm cache, what a server sees), and with
 * the cache bypassed (the BPE itself).  Throughput counts input bytes.
 * A Qwen3.6-sized tokenizer.json for the load figure can be made with
 * tools/make_synthetic_tokenizer.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "text/tokenizer.h"
#include "util/file.h"

#define DEFAULT_TEXT "/usr/share/common-licenses/GPL-3"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Encodes text repeatedly for at least `seconds` (at least once); returns MB/s. */
static double throughput(const lilac_tokenizer *t, const char *text, size_t len, int flags, double seconds,
                         size_t *n_ids, lilac_error *e, lilac_status *st) {
    lilac_ids ids = LILAC_IDS_INIT;
    size_t bytes = 0;
    double t0 = now_s(), el;
    do {
        ids.len = 0;
        if ((*st = lilac_tokenizer_encode(t, text, len, flags, &ids, e))) break;
        bytes += len;
        el = now_s() - t0;
    } while (el < seconds);
    el = now_s() - t0;
    *n_ids = ids.len;
    lilac_ids_free(&ids);
    return el > 0 ? (double)bytes / el / 1e6 : 0;
}

int bench_tokenizer(int argc, char **argv, const cli_globals *g) {
    (void)g;
    const char *model = NULL, *file = DEFAULT_TEXT;
    double seconds = 2.0;
    int loads = 5;
    cli_opt opts[] = {
        {"model", 'm', CLI_STR, &model, "DIR", "model directory with tokenizer.json (required)", 0, 0},
        {"file", 'f', CLI_STR, &file, "TEXT", "text to encode (default " DEFAULT_TEXT ", English prose)", 0, 0},
        {"seconds", 's', CLI_REAL, &seconds, "S", "time per encode measurement (default 2)", 0, 0},
        {"loads", 0, CLI_INT, &loads, "N", "number of timed loads (default 5)", 1, 1000},
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    int help = 0, npos = 0;
    char *pos[1];
    lilac_error e = {0};
    if (cli_parse(argc, argv, opts, nopts, pos, 0, &npos, &help, &e))
        return fprintf(stderr, "error: bench tokenizer: %s\n", e.msg), 2;
    if (help) {
        printf("Usage: lilac bench tokenizer --model DIR [--file TEXT] [--seconds S] [--loads N]\n\n"
               "Measures tokenizer.json load time (ms) and single-threaded encode throughput\n"
               "(MB/s of input text): first pass with an empty word cache, steady state, and\n"
               "with the word cache bypassed.\n\nOptions:\n");
        cli_print_options(stdout, opts, nopts);
        cli_print_globals_help();
        return 0;
    }
    if (!model) return fprintf(stderr, "error: bench tokenizer: --model DIR is required\n"), 2;
    if (!(seconds > 0 && seconds <= 3600))
        return fprintf(stderr, "error: bench tokenizer: --seconds must be in (0, 3600]\n"), 2;
    char *text = NULL;
    size_t len = 0;
    if (lilac_read_file(file, (size_t)1 << 30, &text, &len, &e))
        return fprintf(stderr, "error: bench tokenizer: %s (give a text with --file)\n", e.msg), 1;
    if (len == 0) {
        free(text);
        return fprintf(stderr, "error: bench tokenizer: %s is empty\n", file), 1;
    }

    double *ms = malloc((size_t)loads * sizeof *ms);
    lilac_tokenizer *t = NULL;
    int rc = 0;
    for (int i = 0; i < loads && ms; i++) {
        lilac_tokenizer_free(t);
        t = NULL;
        double t0 = now_s();
        if (lilac_tokenizer_load(model, &t, &e)) {
            fprintf(stderr, "error: bench tokenizer: %s\n", e.msg);
            rc = 1;
            break;
        }
        ms[i] = (now_s() - t0) * 1e3;
    }
    if (!rc && ms) {
        qsort(ms, (size_t)loads, sizeof *ms, cmp_double);
        printf("model:        %s (%d ids)\n", model, lilac_tokenizer_n_ids(t));
        printf("load:         min %.1f ms, median %.1f ms over %d loads\n", ms[0], ms[loads / 2], loads);
        printf("text:         %s (%zu bytes)\n", file, len);
        /* t is fresh: its first pass runs with an empty cache */
        size_t n_ids = 0;
        lilac_status st = LILAC_OK;
        double t0 = now_s();
        lilac_ids ids = LILAC_IDS_INIT;
        st = lilac_tokenizer_encode(t, text, len, 0, &ids, &e);
        double first = now_s() - t0;
        n_ids = ids.len;
        lilac_ids_free(&ids);
        double warm = 0, nocache = 0;
        if (!st) warm = throughput(t, text, len, 0, seconds, &n_ids, &e, &st);
        if (!st) nocache = throughput(t, text, len, LILAC_TOK_NO_CACHE, seconds, &n_ids, &e, &st);
        if (st) {
            fprintf(stderr, "error: bench tokenizer: %s\n", e.msg);
            rc = 1;
        } else {
            printf("ids:          %zu (%.2f bytes/id)\n", n_ids, (double)len / (double)n_ids);
            printf("encode:       first pass %.1f MB/s, steady %.1f MB/s, no word cache %.1f MB/s (1 thread)\n",
                   first > 0 ? (double)len / first / 1e6 : 0, warm, nocache);
        }
    } else if (!ms) {
        fprintf(stderr, "error: bench tokenizer: out of memory\n");
        rc = 1;
    }
    free(ms);
    lilac_tokenizer_free(t);
    free(text);
    return rc;
}
