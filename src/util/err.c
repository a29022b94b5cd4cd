/* err.c — filling lilac_error messages. */
#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

lilac_status lilac_fail(lilac_error *e, lilac_status code, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->code = code;
    }
    return code;
}

lilac_status lilac_fail_prefix(lilac_error *e, const char *fmt, ...) {
    if (!e) return LILAC_EINVAL;
    char prefix[256], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof e->msg - 3) n = sizeof e->msg - 3;
    memcpy(e->msg, prefix, n);
    memcpy(e->msg + n, ": ", 2);
    size_t room = sizeof e->msg - n - 3, olen = strlen(old);
    if (olen > room) olen = room;
    memcpy(e->msg + n + 2, old, olen);
    e->msg[n + 2 + olen] = 0;
    return e->code ? e->code : LILAC_EINVAL;
}

const char *lilac_status_name(lilac_status s) {
    switch (s) {
    case LILAC_OK: return "ok";
    case LILAC_EIO: return "io error";
    case LILAC_EFORMAT: return "format error";
    case LILAC_EINVAL: return "invalid argument";
    case LILAC_ENOMEM: return "out of memory";
    case LILAC_EUNSUPPORTED: return "unsupported";
    case LILAC_EBACKEND: return "backend error";
    case LILAC_ECANCELLED: return "cancelled";
    }
    return "unknown error";
}
