/* args.c — table-driven option parsing and help text. */
#include "cli/args.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int cli_parse_long(const char *s, long lo, long hi, long *out) {
    if (!s || !*s) return 0;
    errno = 0;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

uint64_t cli_parse_bytes(const char *s) {
    if (!s) return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-') return 0;
    int sh = 0;
    switch (*end) {
    case 'K': case 'k': sh = 10; end++; break;
    case 'M': case 'm': sh = 20; end++; break;
    case 'G': case 'g': sh = 30; end++; break;
    case 'T': case 't': sh = 40; end++; break;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end || (sh && v > (~0ULL >> sh))) return 0;
    return (uint64_t)v << sh;
}

static const cli_opt *find(const cli_opt *opts, int nopts, const char *name, size_t len, char alias) {
    for (int i = 0; i < nopts; i++) {
        if (alias && opts[i].alias == alias) return &opts[i];
        if (!alias && strlen(opts[i].name) == len && memcmp(opts[i].name, name, len) == 0) return &opts[i];
    }
    return NULL;
}

static lilac_status assign(const cli_opt *o, const char *val, lilac_error *e) {
    switch (o->kind) {
    case CLI_STR:
        *(const char **)o->dst = val;
        return LILAC_OK;
    case CLI_INT: {
        long v;
        if (!cli_parse_long(val, o->lo, o->hi, &v))
            return lilac_fail(e, LILAC_EINVAL, "--%s: '%s' is not an integer in [%ld, %ld]", o->name,
                              val, o->lo, o->hi);
        *(int *)o->dst = (int)v;
        return LILAC_OK;
    }
    case CLI_REAL: {
        char *end = NULL;
        errno = 0;
        double v = strtod(val, &end);
        if (errno || !*val || *end || !isfinite(v))
            return lilac_fail(e, LILAC_EINVAL, "--%s: '%s' is not a number", o->name, val);
        *(double *)o->dst = v;
        return LILAC_OK;
    }
    case CLI_FLAG:
        *(int *)o->dst = 1;
        return LILAC_OK;
    }
    return lilac_fail(e, LILAC_EINVAL, "--%s: bad option kind", o->name);
}

lilac_status cli_parse(int argc, char **argv, const cli_opt *opts, int nopts, char **pos,
                       int maxpos, int *npos, int *help, lilac_error *e) {
    *npos = 0;
    if (help) *help = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            if (help) *help = 1;
            continue;
        }
        int is_long = a[0] == '-' && a[1] == '-' && a[2] != 0;
        int is_short = a[0] == '-' && isalpha((unsigned char)a[1]);
        if (!is_long && !is_short) {
            /* positional (a lone "-" or a negative number counts as one) */
            if (*npos >= maxpos) return lilac_fail(e, LILAC_EINVAL, "unexpected argument '%s'", a);
            pos[(*npos)++] = argv[i];
            continue;
        }
        const cli_opt *o;
        const char *val = NULL;
        if (is_long) {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            o = find(opts, nopts, name, len, 0);
            if (!o) return lilac_fail(e, LILAC_EINVAL, "unknown option '%.*s'", (int)(len + 2), a);
            if (eq) val = eq + 1;
        } else {
            if (a[2] != 0) return lilac_fail(e, LILAC_EINVAL, "unknown option '%s'", a);
            o = find(opts, nopts, NULL, 0, a[1]);
            if (!o) return lilac_fail(e, LILAC_EINVAL, "unknown option '%s'", a);
        }
        if (o->kind == CLI_FLAG) {
            if (val) return lilac_fail(e, LILAC_EINVAL, "--%s takes no value", o->name);
        } else if (!val) {
            if (i + 1 >= argc) return lilac_fail(e, LILAC_EINVAL, "--%s needs a value (%s)", o->name, o->metavar ? o->metavar : "VALUE");
            val = argv[++i];
        }
        lilac_status st = assign(o, val, e);
        if (st) return st;
    }
    return LILAC_OK;
}

void cli_print_options(FILE *f, const cli_opt *opts, int nopts) {
    for (int i = 0; i < nopts; i++) {
        const cli_opt *o = &opts[i];
        char head[96];
        if (o->alias)
            snprintf(head, sizeof head, "-%c, --%s%s%s", o->alias, o->name, o->kind == CLI_FLAG ? "" : " ",
                     o->kind == CLI_FLAG ? "" : (o->metavar ? o->metavar : "VALUE"));
        else
            snprintf(head, sizeof head, "    --%s%s%s", o->name, o->kind == CLI_FLAG ? "" : " ",
                     o->kind == CLI_FLAG ? "" : (o->metavar ? o->metavar : "VALUE"));
        fprintf(f, "  %-28s %s\n", head, o->help);
    }
}
