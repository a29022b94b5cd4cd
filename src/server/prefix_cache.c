/* prefix_cache.c — an LRU of session snapshots for reusing prompt prefixes.
 *
 * Each slot is a whole lilac_session (KV cache, conv and recurrent state,
 * the tokens it consumed and the logits after its last token).  Recurrent
 * state cannot be rewound, so a slot is useful only to a request whose
 * tokens start with the slot's entire sequence; then the request restores
 * the copy and feeds the rest.  Sessions are created on first use, so unused
 * slots cost nothing.  Used only by the engine thread.
 *
 * Two kinds of snapshot: anchors (taken inside a prompt, right after the
 * generation prompt's "<|im_start|>assistant\n" that follows a user message,
 * or at the end of the system turn: points later requests still share), ends
 * of prompts, and ends of generations.  The end of a prompt supersedes the
 * non-anchor snapshots it extends — in a tool-calling loop each request
 * extends the previous one's prompt (and its generation, when the template
 * re-renders it token for token) — so the chain of a conversation takes two
 * slots instead of pushing its anchors out of the LRU (also when an equal
 * snapshot is already there: the drops do not depend on slot order).  The end
 * of a generation supersedes nothing: the end of its own prompt stays, since
 * the next turn may re-render the generated text differently.
 *
 * Counters: evictions (a live snapshot replaced because every slot was
 * taken) and supersessions (the drops above), for /health and /metrics.
 *
 * Recency: storing (or storing an equal snapshot again) and restoring make a
 * slot the most recently used; find only looks.  A request that reuses a
 * longer prefix also uses the anchors inside it (touch_anchors): the system
 * turn every conversation starts with must not age out while conversations
 * keep starting from their own later snapshots.  NULL arguments find nothing
 * or fail with LILAC_EINVAL. */
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

typedef struct {
    lilac_session *s; /* NULL until first stored */
    unsigned long long used; /* LRU clock; 0 = empty */
    int anchor;
} slot;

struct srv_pcache {
    lilac_engine *g;
    int ctx, n;
    slot *slots;
    unsigned long long clock;
    long evictions;  /* live snapshots replaced by the LRU to make room */
    long superseded; /* non-anchor snapshots dropped by a prompt end that extends them */
};

lilac_status srv_pcache_new(lilac_engine *g, int slots, int ctx, srv_pcache **out, lilac_error *e) {
    *out = NULL;
    srv_pcache *c = calloc(1, sizeof *c);
    if (!c || !(c->slots = calloc((size_t)(slots > 0 ? slots : 1), sizeof *c->slots))) {
        free(c);
        return lilac_fail(e, LILAC_ENOMEM, "prefix cache");
    }
    c->g = g;
    c->ctx = ctx;
    c->n = slots;
    *out = c;
    return LILAC_OK;
}

void srv_pcache_free(srv_pcache *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) lilac_session_free(c->slots[i].s);
    free(c->slots);
    free(c);
}

int srv_pcache_find(srv_pcache *c, const int32_t *ids, int n, int *len) {
    int best = -1, best_len = 0;
    for (int i = 0; c && ids && i < c->n; i++) {
        if (!c->slots[i].used) continue;
        int m = lilac_session_len(c->slots[i].s);
        if (m <= best_len || m > n) continue;
        if (memcmp(lilac_session_tokens(c->slots[i].s), ids, (size_t)m * sizeof *ids) == 0) {
            best = i;
            best_len = m;
        }
    }
    if (len) *len = best_len;
    return best;
}

lilac_status srv_pcache_restore(srv_pcache *c, int i, lilac_session *dst, lilac_error *e) {
    if (!c || !dst) return lilac_fail(e, LILAC_EINVAL, "prefix cache: restore needs a cache and a session");
    if (i < 0 || i >= c->n || !c->slots[i].used) return lilac_fail(e, LILAC_EINVAL, "prefix cache: no slot %d", i);
    c->slots[i].used = ++c->clock;
    return lilac_session_copy(dst, c->slots[i].s, e);
}

lilac_status srv_pcache_store(srv_pcache *c, const lilac_session *src, srv_snap kind, lilac_error *e) {
    const int anchor = kind == SRV_SNAP_ANCHOR;
    if (!c || !src) return lilac_fail(e, LILAC_EINVAL, "prefix cache: store needs a cache and a session");
    if (c->n <= 0) return LILAC_OK;
    int n = lilac_session_len(src);
    if (n <= 0) return LILAC_OK;
    const int32_t *t = lilac_session_tokens(src);
    int same = -1;
    for (int i = 0; i < c->n; i++) {
        slot *sl = &c->slots[i];
        if (!sl->used) continue;
        int m = lilac_session_len(sl->s);
        if (m > n || memcmp(lilac_session_tokens(sl->s), t, (size_t)m * sizeof(int32_t)) != 0) continue;
        if (m == n) same = i; /* already there; the drops still apply to the other slots */
        else if (!sl->anchor && kind == SRV_SNAP_PROMPT) sl->used = 0, c->superseded++;
    }
    if (same >= 0) {
        c->slots[same].used = ++c->clock;
        c->slots[same].anchor |= anchor;
        return LILAC_OK;
    }
    int victim = 0;
    for (int i = 1; i < c->n; i++)
        if (c->slots[i].used < c->slots[victim].used) victim = i;
    slot *v = &c->slots[victim];
    if (v->used) c->evictions++;
    if (!v->s) {
        lilac_status st = lilac_session_new(c->g, c->ctx, &v->s, e);
        if (st) return st;
    }
    v->used = 0; /* stays empty if the copy fails */
    lilac_status st = lilac_session_copy(v->s, src, e);
    if (st) return st;
    v->used = ++c->clock;
    v->anchor = anchor;
    return LILAC_OK;
}

void srv_pcache_touch_anchors(srv_pcache *c, const int32_t *ids, int n) {
    for (int i = 0; c && ids && i < c->n; i++) {
        slot *sl = &c->slots[i];
        if (!sl->used || !sl->anchor) continue;
        int m = lilac_session_len(sl->s);
        if (m <= n && memcmp(lilac_session_tokens(sl->s), ids, (size_t)m * sizeof *ids) == 0) sl->used = ++c->clock;
    }
}

void srv_pcache_counts(const srv_pcache *c, long *evictions, long *superseded) {
    *evictions = c ? c->evictions : 0;
    *superseded = c ? c->superseded : 0;
}

int srv_pcache_used(const srv_pcache *c) {
    int n = 0;
    for (int i = 0; c && i < c->n; i++) n += c->slots[i].used != 0;
    return n;
}
