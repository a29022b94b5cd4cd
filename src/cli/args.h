/* args.h — declarative option parsing for the lilac subcommands.
 *
 * Each command lists its options in a table; the same table parses argv and
 * prints `lilac COMMAND --help`, so help can never drift from what is parsed.
 * Accepted forms: --name VALUE, --name=VALUE, -x VALUE for one-letter aliases,
 * and bare --name for flags.  Anything else that starts with '-' is an error;
 * other words are positional arguments. */
#ifndef LILAC_CLI_ARGS_H
#define LILAC_CLI_ARGS_H

#include <stdint.h>
#include <stdio.h>
#include "util/err.h"

typedef enum {
    CLI_STR,  /* const char ** */
    CLI_INT,  /* int *, decimal, range-checked against lo..hi */
    CLI_REAL, /* double * */
    CLI_FLAG, /* int *, set to 1 */
} cli_kind;

typedef struct {
    const char *name;  /* long name without the dashes */
    char alias;        /* one-letter alias or 0 */
    cli_kind kind;
    void *dst;
    const char *metavar; /* shown in help, e.g. "DIR" */
    const char *help;
    long lo, hi;         /* CLI_INT bounds (inclusive) */
} cli_opt;

/* Parses argv[0..argc) (argv[0] is the first word after the command name).
 * Positional words go to pos[0..maxpos); *npos receives their count.  Returns
 * LILAC_OK, or an error naming the option.  Sets *help if --help/-h was seen. */
lilac_status cli_parse(int argc, char **argv, const cli_opt *opts, int nopts, char **pos,
                       int maxpos, int *npos, int *help, lilac_error *e);

void cli_print_options(FILE *f, const cli_opt *opts, int nopts);

/* Parses a strict decimal integer (no junk, no overflow) within [lo, hi]. */
int cli_parse_long(const char *s, long lo, long hi, long *out);

/* BYTES with an optional K, M, G or T (powers of 1024) and an optional B;
 * 0 on error (so 0 itself is refused). */
uint64_t cli_parse_bytes(const char *s);

#endif
