/* prefix_cache.c — an LRU of session snapshots for reusing prompt prefixes,
 * and how snapshots move between its tiers.
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
 * Recency: storing (or storing an equal snapshot again) and restoring make a
 * slot the most recently used; find only looks.  A request that reuses a
 * longer prefix also uses the anchors inside it (touch_anchors): the system
 * turn every conversation starts with must not age out while conversations
 * keep starting from their own later snapshots.  NULL arguments find nothing
 * or fail with LILAC_EINVAL.
 *
 * Tiers below the slots (pcache_tiers.h): a snapshot the slots evict goes to
 * RAM (--cache-ram, pcache_ram.c) when RAM takes it, else to the directory
 * (--cache-dir, pcache_disk.c) unless a file holds it already, else it is
 * gone; RAM's own evictions go to the directory.  Files are written on
 * eviction and at shutdown (every slot and RAM image not on disk yet, least
 * recent first), not on every store: most snapshots are superseded within a
 * turn or two, and writing each (up to hundreds of MB at long contexts)
 * would stall the engine thread for nothing.  The cost: a crash (SIGKILL,
 * power) loses what was only in the slots and RAM.  srv_pcache_fetch loads
 * the longest snapshot of the lower tiers that prefixes a prompt into a slot
 * (RAM first on equal length).  With RAM, the snapshots a prompt end
 * supersedes are not dropped but kept there (transient) until the next
 * prompt end of the same chain: a client that retries or edits the last
 * step of a tool loop then starts from the step before. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/pcache_tiers.h"

const char *const srv_tier_name[SRV_TIER_N] = {"device", "ram", "disk"};

double pc_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

int pc_same(const int32_t *a, int na, const int32_t *b, int nb) {
    return na == nb && memcmp(a, b, (size_t)na * sizeof *a) == 0;
}

int pc_prefix(const int32_t *a, int na, const int32_t *b, int nb) {
    return na <= nb && memcmp(a, b, (size_t)na * sizeof *a) == 0;
}

void pc_forget_file(srv_pcache *c, const int32_t *t, int n) {
    for (int i = 0; i < c->n; i++)
        if (c->slots[i].used && pc_same(lilac_session_tokens(c->slots[i].s), lilac_session_len(c->slots[i].s), t, n))
            c->slots[i].on_disk = 0;
    for (int i = 0; i < c->nr; i++)
        if (pc_same(c->ram[i].tokens, c->ram[i].n, t, n)) c->ram[i].on_disk = 0;
}

lilac_status srv_pcache_new(lilac_engine *g, int slots, int ctx, srv_pcache **out, lilac_error *e) {
    *out = NULL;
    srv_pcache *c = calloc(1, sizeof *c);
    if (!c || !(c->slots = calloc((size_t)(slots > 0 ? slots : 1), sizeof *c->slots))) {
        free(c);
        return lilac_fail(e, LILAC_ENOMEM, "prefix cache");
    }
    c->g = g;
    c->who = "lilac serve";
    c->ctx = ctx;
    c->n = slots;
    *out = c;
    return LILAC_OK;
}

void srv_pcache_set_ram(srv_pcache *c, uint64_t max_bytes) {
    if (c) c->ram_max = max_bytes;
}

void srv_pcache_set_log(srv_pcache *c, const char *who, int verbose) {
    if (!c) return;
    if (who) c->who = who;
    c->quiet = !verbose;
}

/* Shutdown: every snapshot not on disk yet, least recently used first, so
 * that the files' times keep the order for the next start. */
static void flush_to_disk(srv_pcache *c) {
    for (unsigned long long after = 0;;) {
        int slot = -1, img = -1;
        unsigned long long best = 0;
        for (int i = 0; i < c->n; i++) {
            const pc_slot *sl = &c->slots[i];
            if (sl->used > after && !sl->on_disk && (!best || sl->used < best)) best = sl->used, slot = i, img = -1;
        }
        for (int i = 0; i < c->nr; i++)
            if (c->ram[i].used > after && !c->ram[i].on_disk && !c->ram[i].transient && (!best || c->ram[i].used < best))
                best = c->ram[i].used, img = i, slot = -1;
        if (!best) return;
        after = best;
        if (slot >= 0 && pc_disk_save_session(c, c->slots[slot].s, c->slots[slot].anchor, best) == 0)
            c->slots[slot].on_disk = 1;
        if (img >= 0) pc_ram_save(c, img);
    }
}

void srv_pcache_free(srv_pcache *c) {
    if (!c) return;
    if (c->dir) flush_to_disk(c);
    if (c->ram_max && !c->quiet)
        fprintf(stderr,
                "%s: prefix cache in RAM: %d snapshot%s (%.1f MiB); %ld kept (%.1f ms), %ld restored (%.1f ms), "
                "%ld evicted\n",
                c->who, c->nr, c->nr == 1 ? "" : "s", c->ram_bytes / 1048576.0, c->ram_saves, c->ram_save_ms,
                c->ram_loads, c->ram_load_ms, c->evictions[SRV_TIER_RAM]);
    if (c->dir && !c->quiet)
        fprintf(stderr,
                "%s: prefix cache on disk: %s: %d snapshot%s (%.1f MiB); %ld written (%.1f ms), %ld loaded (%.1f ms)\n",
                c->who, c->dir, c->nd, c->nd == 1 ? "" : "s", c->disk_bytes / 1048576.0, c->saves, c->save_ms, c->loads,
                c->load_ms);
    for (int i = 0; i < c->n; i++) lilac_session_free(c->slots[i].s);
    pc_ram_free(c);
    pc_disk_free(c);
    free(c->slots);
    free(c);
}

/* The slot the next store fills (the least recently used or an empty one);
 * a snapshot it held moves down a tier: to RAM when RAM takes it, else to
 * the directory when no file holds it yet. */
static pc_slot *take_victim(srv_pcache *c) {
    int victim = 0;
    for (int i = 1; i < c->n; i++)
        if (c->slots[i].used < c->slots[victim].used) victim = i;
    pc_slot *v = &c->slots[victim];
    if (v->used) {
        c->evictions[SRV_TIER_DEVICE]++;
        if (pc_ram_put(c, v, 0) != 0 && c->dir && !v->on_disk) pc_disk_save_session(c, v->s, v->anchor, v->used);
    }
    v->used = 0;
    return v;
}

typedef struct {
    srv_tier tier;
    int i, n; /* entry of that tier (-1: none), its tokens */
} candidate;

/* The longest RAM image or file longer than min_len that prefixes ids[0..n). */
static candidate lower_tier_best(const srv_pcache *c, const int32_t *ids, int n, int min_len) {
    candidate b = {SRV_TIER_DEVICE, -1, 0};
    for (int i = 0; i < c->nr; i++) {
        const pc_ram *r = &c->ram[i];
        if (r->n > min_len && r->n > b.n && pc_prefix(r->tokens, r->n, ids, n)) b = (candidate){SRV_TIER_RAM, i, r->n};
    }
    for (int i = 0; i < c->nd; i++) { /* strictly longer: RAM wins a tie */
        const pc_file *d = &c->disk[i];
        if (d->n > min_len && d->n > b.n && pc_prefix(d->tokens, d->n, ids, n)) b = (candidate){SRV_TIER_DISK, i, d->n};
    }
    return b;
}

int srv_pcache_fetch(srv_pcache *c, const int32_t *ids, int n, int min_len, int *len, srv_tier *from) {
    if (len) *len = 0;
    if (!c || !ids || c->n <= 0) return -1;
    for (;;) {
        candidate b = lower_tier_best(c, ids, n, min_len);
        if (b.i < 0) return -1;
        /* it is being used: the victim's move down must not push it out */
        if (b.tier == SRV_TIER_RAM) c->ram[b.i].used = ++c->clock;
        else c->disk[b.i].used = ++c->clock;
        pc_slot *v = take_victim(c);
        b = lower_tier_best(c, ids, n, min_len); /* the move may have renumbered (or moved) it */
        if (b.i < 0) return -1;
        lilac_error e = {0};
        if (!v->s && lilac_session_new(c->g, c->ctx, &v->s, &e)) {
            fprintf(stderr, "%s: warning: prefix cache: %s\n", c->who, e.msg);
            return -1;
        }
        uint32_t flags = 0;
        int on_disk = 1;
        lilac_status st;
        if (b.tier == SRV_TIER_RAM) {
            on_disk = c->ram[b.i].on_disk;
            st = pc_ram_take(c, b.i, v->s, &flags, &e);
        } else {
            st = pc_disk_load(c, b.i, v->s, &flags);
        }
        if (st) continue; /* dropped; a shorter one may still do (v stays empty, so it is the next victim) */
        v->used = ++c->clock;
        v->anchor = (flags & SNAP_FLAG_ANCHOR) != 0;
        v->on_disk = on_disk;
        if (len) *len = b.n;
        if (from) *from = b.tier;
        return (int)(v - c->slots);
    }
}

int srv_pcache_longest(const srv_pcache *c, const int32_t *ids, int n) {
    if (!c || !ids) return 0;
    int best = 0;
    for (int i = 0; i < c->n; i++) {
        const pc_slot *sl = &c->slots[i];
        const int m = sl->used ? lilac_session_len(sl->s) : 0;
        if (m > best && pc_prefix(lilac_session_tokens(sl->s), m, ids, n)) best = m;
    }
    candidate b = lower_tier_best(c, ids, n, best);
    return b.i >= 0 ? b.n : best;
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

/* A prompt end t[0..n) supersedes the non-anchor snapshots it extends: the
 * RAM images of earlier steps go, and the slots' ones (this step's) move to
 * RAM as transient images when RAM takes them. */
static void supersede_images(srv_pcache *c, const int32_t *t, int n) {
    for (int i = 0; i < c->nr;)
        if (!c->ram[i].anchor && c->ram[i].n < n && pc_prefix(c->ram[i].tokens, c->ram[i].n, t, n)) {
            pc_ram_drop(c, i);
            c->superseded++;
        } else {
            i++;
        }
}

static void supersede_slot(srv_pcache *c, pc_slot *sl) {
    (void)pc_ram_put(c, sl, 1);
    sl->used = 0;
    c->superseded++;
}

lilac_status srv_pcache_store(srv_pcache *c, const lilac_session *src, srv_snap kind, lilac_error *e) {
    const int anchor = kind == SRV_SNAP_ANCHOR;
    if (!c || !src) return lilac_fail(e, LILAC_EINVAL, "prefix cache: store needs a cache and a session");
    if (c->n <= 0) return LILAC_OK;
    int n = lilac_session_len(src);
    if (n <= 0) return LILAC_OK;
    const int32_t *t = lilac_session_tokens(src);
    if (kind == SRV_SNAP_PROMPT) supersede_images(c, t, n);
    int same = -1;
    for (int i = 0; i < c->n; i++) {
        pc_slot *sl = &c->slots[i];
        if (!sl->used) continue;
        int m = lilac_session_len(sl->s);
        if (!pc_prefix(lilac_session_tokens(sl->s), m, t, n)) continue;
        if (m == n) same = i; /* already there; the drops still apply to the other slots */
        else if (!sl->anchor && kind == SRV_SNAP_PROMPT) supersede_slot(c, sl);
    }
    if (same >= 0) {
        c->slots[same].used = ++c->clock;
        c->slots[same].anchor |= anchor;
        return LILAC_OK;
    }
    pc_slot *v = take_victim(c);
    if (!v->s) {
        lilac_status st = lilac_session_new(c->g, c->ctx, &v->s, e);
        if (st) return st;
    }
    v->used = 0; /* stays empty if the copy fails */
    lilac_status st = lilac_session_copy(v->s, src, e);
    if (st) return st;
    v->used = ++c->clock;
    v->anchor = anchor;
    int r = pc_ram_find(c, t, n); /* the tiers are exclusive: the slot has it now */
    if (r >= 0) {
        v->anchor |= c->ram[r].anchor;
        pc_ram_drop(c, r);
    }
    v->on_disk = c->dir && pc_disk_find(c, t, n) >= 0;
    return LILAC_OK;
}

void srv_pcache_touch_anchors(srv_pcache *c, const int32_t *ids, int n) {
    if (!c || !ids) return;
    for (int i = 0; i < c->n; i++) {
        pc_slot *sl = &c->slots[i];
        if (sl->used && sl->anchor && pc_prefix(lilac_session_tokens(sl->s), lilac_session_len(sl->s), ids, n))
            sl->used = ++c->clock;
    }
    for (int i = 0; i < c->nr; i++)
        if (c->ram[i].anchor && pc_prefix(c->ram[i].tokens, c->ram[i].n, ids, n)) c->ram[i].used = ++c->clock;
    for (int i = 0; i < c->nd; i++)
        if (c->disk[i].anchor && pc_prefix(c->disk[i].tokens, c->disk[i].n, ids, n)) c->disk[i].used = ++c->clock;
}

void srv_pcache_counts(const srv_pcache *c, long *evictions, long *superseded) {
    *evictions = c ? c->evictions[SRV_TIER_DEVICE] : 0;
    *superseded = c ? c->superseded : 0;
}

void srv_pcache_hit(srv_pcache *c, srv_tier t, int tokens) {
    if (!c || t < 0 || t >= SRV_TIER_N || tokens <= 0) return;
    c->hits[t]++;
    c->reused[t] += tokens;
}

int srv_pcache_used(const srv_pcache *c) {
    int n = 0;
    for (int i = 0; c && i < c->n; i++) n += c->slots[i].used != 0;
    return n;
}

void srv_pcache_tier_stats(const srv_pcache *c, srv_tier_stats out[SRV_TIER_N]) {
    memset(out, 0, SRV_TIER_N * sizeof *out);
    if (!c) return;
    for (int t = 0; t < SRV_TIER_N; t++) {
        out[t].hits = c->hits[t];
        out[t].reused_tokens = c->reused[t];
        out[t].evictions = c->evictions[t];
    }
    const uint64_t session = lilac_session_bytes(c->g, c->ctx);
    out[SRV_TIER_DEVICE].snapshots = srv_pcache_used(c);
    out[SRV_TIER_DEVICE].bytes = (uint64_t)out[SRV_TIER_DEVICE].snapshots * session;
    out[SRV_TIER_DEVICE].capacity = (uint64_t)(c->n > 0 ? c->n : 0) * session;
    out[SRV_TIER_RAM].snapshots = c->nr;
    out[SRV_TIER_RAM].bytes = c->ram_bytes;
    out[SRV_TIER_RAM].capacity = c->ram_max;
    out[SRV_TIER_DISK].snapshots = c->nd;
    out[SRV_TIER_DISK].bytes = c->disk_bytes;
    out[SRV_TIER_DISK].capacity = c->dir ? c->disk_max : 0;
}
