/* session_fed.h — test helper: a new session of capacity cap fed ids[0..n)
 * (n may be 0), or NULL after a failed CHECK saying why. */
#ifndef LILAC_TEST_SESSION_FED_H
#define LILAC_TEST_SESSION_FED_H

#include "check.h"
#include "lilac.h"

static inline lilac_session *session_fed(lilac_engine *eng, int cap, const int32_t *ids, int n) {
    lilac_session *s = NULL;
    lilac_error e = {0};
    CHECK(lilac_session_new(eng, cap, &s, &e) == LILAC_OK, "session: %s", e.msg);
    if (s && n > 0 && lilac_session_feed(s, ids, n, NULL, 0, &e) != LILAC_OK) {
        CHECK(0, "feed %d tokens: %s", n, e.msg);
        lilac_session_free(s);
        return NULL;
    }
    return s;
}

#endif
