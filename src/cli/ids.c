/* ids.c — parsing token id lists, with errors that name the offending entry. */
#include "cli/ids.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/file.h"

lilac_status cli_parse_ids(const char *spec, const char *what, int vocab_limit, int32_t **ids, int *n, lilac_error *e) {
    *ids = NULL;
    *n = 0;
    if (!spec) return lilac_fail(e, LILAC_EINVAL, "no token ids given");
    char *text = NULL;
    const char *src = spec, *where = what ? what : "IDS";
    if (spec[0] == '@') {
        lilac_status st = lilac_read_file(spec + 1, 256u << 20, &text, NULL, e);
        if (st) return st;
        src = text;
        where = spec + 1;
    }
    const int commas = !text; /* "1,2,3"; a file is whitespace-separated */
    size_t cap = 64;
    int32_t *out = malloc(cap * sizeof *out);
    if (!out) {
        free(text);
        return lilac_fail(e, LILAC_ENOMEM, "token ids");
    }
    int count = 0, after_comma = 0;
    lilac_status st = LILAC_OK;
    const char *p = src;
    for (;;) {
        while (*p && isspace((unsigned char)*p)) p++;
        if (!*p || (commas && *p == ',')) {
            /* "1,,2", ",1" and "1," have an empty entry: a typo, not a shorter list */
            if (commas && (*p == ',' || after_comma))
                st = lilac_fail(e, LILAC_EINVAL, "%s: entry %d is empty (ids are separated by single commas)", where,
                                count + 1);
            break;
        }
        const char *start = p;
        errno = 0;
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || errno || (*end && !isspace((unsigned char)*end) && !(*end == ',' && commas))) {
            int len = 0;
            while (start[len] && !isspace((unsigned char)start[len]) && start[len] != ',' && len < 32) len++;
            st = lilac_fail(e, LILAC_EINVAL, "%s: entry %d ('%.*s') is not an integer token id", where, count + 1, len, start);
            break;
        }
        if (v < 0 || (vocab_limit > 0 && v >= vocab_limit) || v > INT32_MAX) {
            st = lilac_fail(e, LILAC_EINVAL, "%s: token id %ld (entry %d) is outside the vocabulary [0, %d)", where, v,
                            count + 1, vocab_limit);
            break;
        }
        if ((size_t)count == cap) {
            int32_t *g = realloc(out, 2 * cap * sizeof *out);
            if (!g) {
                st = lilac_fail(e, LILAC_ENOMEM, "token ids");
                break;
            }
            out = g;
            cap *= 2;
        }
        out[count++] = (int32_t)v;
        p = end;
        while (*p && isspace((unsigned char)*p)) p++;
        after_comma = commas && *p == ',';
        if (after_comma) p++;
    }
    free(text);
    if (!st && count == 0) st = lilac_fail(e, LILAC_EINVAL, "%s: the token id list is empty", where);
    if (st) {
        free(out);
        return st;
    }
    *ids = out;
    *n = count;
    return LILAC_OK;
}
