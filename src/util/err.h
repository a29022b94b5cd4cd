/* err.h — the one status convention of lilac.
 *
 * Every library function that can fail returns a lilac_status (0 = LILAC_OK)
 * and, on failure, fills a caller-provided lilac_error with one line that says
 * what is wrong and where (file, tensor, key, byte offset).  Only main() exits.
 */
#ifndef LILAC_UTIL_ERR_H
#define LILAC_UTIL_ERR_H

#include "lilac.h"

/* Sets e->code and e->msg (printf-style) and returns code, so that a failure
 * reads as `return lilac_fail(e, LILAC_EFORMAT, "%s: bad header", path);`.
 * e may be NULL. */
lilac_status lilac_fail(lilac_error *e, lilac_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes an existing message with context: "ctx: old message". */
lilac_status lilac_fail_prefix(lilac_error *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
