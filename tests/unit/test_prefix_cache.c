/* test_prefix_cache.c — the server's LRU of session snapshots
 * (src/server/prefix_cache.c) on the tiny model, CPU backend: the longest
 * stored prefix is found, a restored session continues exactly (bitwise) like
 * one fed the same tokens directly, the least recently used slot goes first
 * (restore and re-storing refresh recency, find does not), the end of a
 * prompt drops the non-anchor snapshots it extends whatever their slot order,
 * and bad arguments fail cleanly. */
#include <stdint.h>

#include "check.h"
#include "session_fed.h"
#include "lilac.h"
#include "server/server.h"

#define TINY "tests/fixtures/tiny"
#define CTX 64

static lilac_engine *eng;

/* A fresh session fed ids[0..n) in one call (NULL on failure, reported). */
static lilac_session *fed(const int32_t *ids, int n) { return session_fed(eng, CTX, ids, n); }

static srv_pcache *cache_of(int slots) {
    srv_pcache *c = NULL;
    lilac_error e = {0};
    CHECK(srv_pcache_new(eng, slots, CTX, &c, &e) == LILAC_OK && c, "new cache: %s", e.msg);
    return c;
}

/* Stores a session fed ids[0..n) as a snapshot of kind k. */
static void store(srv_pcache *c, const int32_t *ids, int n, srv_snap k) {
    lilac_session *s = fed(ids, n);
    if (!s) return;
    lilac_error e = {0};
    CHECK(srv_pcache_store(c, s, k, &e) == LILAC_OK, "store %d tokens: %s", n, e.msg);
    lilac_session_free(s);
}

/* The length of the prefix find() reports for q[0..n), after checking that
 * the slot it names really holds q[0..len) (by restoring it); -1 when none. */
static int found(srv_pcache *c, const int32_t *q, int n) {
    int len = -7, slot = srv_pcache_find(c, q, n, &len);
    if (slot < 0) {
        CHECK(len == 0, "no slot, but len %d", len);
        return -1;
    }
    lilac_session *d = fed(NULL, 0);
    lilac_error e = {0};
    if (!d) return -2;
    CHECK(srv_pcache_restore(c, slot, d, &e) == LILAC_OK, "restore slot %d: %s", slot, e.msg);
    CHECK(lilac_session_len(d) == len && memcmp(lilac_session_tokens(d), q, (size_t)len * sizeof *q) == 0,
          "slot %d holds %d tokens, find said a prefix of %d", slot, lilac_session_len(d), len);
    lilac_session_free(d);
    return len;
}

/* find() without restoring (restore refreshes recency, which some tests avoid). */
static int peek(srv_pcache *c, const int32_t *q, int n) {
    int len = 0;
    return srv_pcache_find(c, q, n, &len) >= 0 ? len : -1;
}

static int keep_token(void *ctx, const lilac_token_info *t) {
    *(lilac_token_info *)ctx = *t;
    return 0;
}

static const int32_t S1[] = {11, 12}, S2[] = {11, 12, 13, 14}, S3[] = {11, 12, 13, 14, 15, 16}, S4[] = {70, 80, 90};
#define N_(a) ((int)(sizeof(a) / sizeof *(a)))

static void test_find_longest_prefix(void) {
    srv_pcache *c = cache_of(4);
    REQUIRE(c, "no cache");
    /* stored in a mixed order, as ends of generations (they drop nothing) */
    store(c, S2, N_(S2), SRV_SNAP_GEN);
    store(c, S4, N_(S4), SRV_SNAP_GEN);
    store(c, S3, N_(S3), SRV_SNAP_GEN);
    store(c, S1, N_(S1), SRV_SNAP_GEN);
    const int32_t q1[] = {11, 12, 13, 14, 15, 16, 17}, q2[] = {11, 12, 13, 14, 15}, q3[] = {11, 12, 13, 99},
                  q4[] = {70, 80, 90, 11}, q5[] = {11}, q6[] = {12, 11, 13, 14, 15, 16}, q7[] = {70, 80},
                  q8[] = {99, 12, 13, 14, 15, 16, 17};
    CHECK(found(c, q1, N_(q1)) == 6, "the longest of three nested prefixes");
    CHECK(found(c, q2, N_(q2)) == 4, "a query between two stored lengths");
    CHECK(found(c, q3, N_(q3)) == 2, "diverging after the shortest");
    CHECK(found(c, S1, N_(S1)) == 2, "a query equal to a stored sequence");
    CHECK(found(c, S3, N_(S3)) == 6, "a query equal to the longest");
    CHECK(found(c, q4, N_(q4)) == 3, "the other family");
    CHECK(found(c, q5, N_(q5)) == -1, "shorter than every stored prefix");
    CHECK(found(c, q7, N_(q7)) == -1, "shorter than the only candidate");
    CHECK(found(c, q6, N_(q6)) == -1, "diverging at the first token");
    CHECK(found(c, q8, N_(q8)) == -1, "diverging at the first token, same tail");
    CHECK(found(c, q1, 0) == -1, "n = 0");
    srv_pcache_free(c);
}

/* Next-token logits (and the state behind them) of a restored session equal
 * those of a session fed the same tokens directly, bit for bit. */
static void test_restore_is_exact(void) {
    const int32_t prefix[] = {3, 141, 59, 26, 53, 58, 97, 93, 238, 46, 264, 33, 83, 279, 50};
    const int32_t more[] = {288, 41, 97, 169, 399};
    const int P = N_(prefix), M = N_(more);
    lilac_engine_info info;
    lilac_engine_get_info(eng, &info);
    const int V = info.vocab_size;
    srv_pcache *c = cache_of(2);
    lilac_session *src = fed(prefix, P), *direct = fed(prefix, P);
    /* the restore target held something else, longer, before */
    const int32_t junk[] = {7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7};
    lilac_session *dst = fed(junk, N_(junk));
    float *a = malloc((size_t)V * M * sizeof *a), *b = malloc((size_t)V * M * sizeof *b);
    lilac_error e = {0};
    REQUIRE(c && src && direct && dst && a && b, "setup");
    const lilac_gen_params gp = {.max_tokens = 1, .sampling = lilac_sampling_greedy(), .logprobs = 1,
                                 .top_logprobs = LILAC_MAX_TOP_LOGPROBS};
    CHECK(srv_pcache_store(c, src, SRV_SNAP_PROMPT, &e) == LILAC_OK, "store: %s", e.msg);
    /* the slot is a copy: what happens to the source later does not reach it */
    CHECK(lilac_session_feed(src, more, 2, NULL, 0, &e) == LILAC_OK, "feed src: %s", e.msg);
    lilac_session_free(src);

    int len = 0, slot = srv_pcache_find(c, prefix, P, &len);
    REQUIRE(slot >= 0 && len == P, "find: slot %d len %d", slot, len);
    CHECK(srv_pcache_restore(c, slot, dst, &e) == LILAC_OK, "restore: %s", e.msg);
    CHECK(lilac_session_len(dst) == P && memcmp(lilac_session_tokens(dst), prefix, sizeof prefix) == 0,
          "restored tokens (%d)", lilac_session_len(dst));

    /* the logits after the last prefix token (copied with the slot), read
     * through one greedy step with logprobs: the token and its top-20 */
    lilac_token_info got[2];
    lilac_session *pair[2] = {dst, direct};
    for (int k = 0; k < 2; k++) {
        lilac_session *s = fed(NULL, 0);
        REQUIRE(s, "session");
        memset(&got[k], 0, sizeof got[k]);
        int n = 0;
        lilac_finish why;
        CHECK(lilac_session_copy(s, pair[k], &e) == LILAC_OK, "%s", e.msg);
        CHECK(lilac_session_generate(s, &gp, keep_token, &got[k], &n, &why, &e) == LILAC_OK && n == 1, "%s", e.msg);
        lilac_session_free(s);
    }
    CHECK(got[0].id == got[1].id && got[0].n_top == LILAC_MAX_TOP_LOGPROBS && got[1].n_top == got[0].n_top,
          "next token: restored %d, direct %d", got[0].id, got[1].id);
    CHECK(memcmp(&got[0].logprob, &got[1].logprob, sizeof got[0].logprob) == 0 &&
              memcmp(got[0].top_ids, got[1].top_ids, sizeof got[0].top_ids) == 0 &&
              memcmp(got[0].top_logprobs, got[1].top_logprobs, sizeof got[0].top_logprobs) == 0,
          "next-token logprobs differ: %.9g vs %.9g", got[0].logprob, got[1].logprob);

    /* then the state: both read the same continuation, all logits compared */
    CHECK(lilac_session_feed(dst, more, M, a, 1, &e) == LILAC_OK, "feed restored: %s", e.msg);
    CHECK(lilac_session_feed(direct, more, M, b, 1, &e) == LILAC_OK, "feed direct: %s", e.msg);
    size_t diff = 0;
    for (size_t i = 0; i < (size_t)V * M; i++) diff += memcmp(&a[i], &b[i], sizeof *a) != 0;
    CHECK(diff == 0, "%zu of %d logits differ between the restored and the direct session", diff, V * M);

    /* control: the comparison can fail — a prefix that differs in its first
     * token only gives other logits for the same continuation */
    int32_t other[N_(prefix)];
    memcpy(other, prefix, sizeof other);
    other[0] = 4;
    lilac_session *o = fed(other, P);
    REQUIRE(o, "session");
    CHECK(lilac_session_feed(o, more, M, a, 1, &e) == LILAC_OK, "%s", e.msg);
    diff = 0;
    for (size_t i = 0; i < (size_t)V * M; i++) diff += memcmp(&a[i], &b[i], sizeof *a) != 0;
    CHECK(diff > (size_t)V * M / 2, "another prefix changes only %zu of %d logits", diff, V * M);
    lilac_session_free(o);

    /* restoring again gives the same state once more (the slot was not consumed) */
    lilac_session *again = fed(NULL, 0);
    REQUIRE(again, "session");
    CHECK(srv_pcache_restore(c, slot, again, &e) == LILAC_OK, "restore again: %s", e.msg);
    CHECK(lilac_session_feed(again, more, M, a, 1, &e) == LILAC_OK, "%s", e.msg);
    diff = 0;
    for (size_t i = 0; i < (size_t)V * M; i++) diff += memcmp(&a[i], &b[i], sizeof *a) != 0;
    CHECK(diff == 0, "second restore: %zu logits differ", diff);
    lilac_session_free(again);
    free(a);
    free(b);
    lilac_session_free(dst);
    lilac_session_free(direct);
    srv_pcache_free(c);
}

static const int32_t A[] = {21, 22, 23}, B[] = {31, 32, 33}, C[] = {41, 42, 43}, D[] = {51, 52, 53}, E[] = {61, 62},
                     F[] = {71, 72}, G[] = {81, 82};

/* Three slots; the least recently used one is replaced.  Restoring a slot and
 * storing an equal snapshot again make it the most recent; find does not. */
static void test_lru_eviction(void) {
    srv_pcache *c = cache_of(3);
    REQUIRE(c, "no cache");
    store(c, A, N_(A), SRV_SNAP_GEN);
    store(c, B, N_(B), SRV_SNAP_GEN);
    store(c, C, N_(C), SRV_SNAP_GEN);
    CHECK(peek(c, A, 3) == 3 && peek(c, B, 3) == 3 && peek(c, C, 3) == 3, "three fit");
    long ev = -1, sup = -1;
    srv_pcache_counts(c, &ev, &sup);
    CHECK(ev == 0 && sup == 0, "no evictions while slots are free (%ld, %ld)", ev, sup);
    store(c, D, N_(D), SRV_SNAP_GEN); /* full: A is the oldest */
    CHECK(peek(c, A, 3) == -1, "A (least recently used) was evicted");
    srv_pcache_counts(c, &ev, &sup);
    CHECK(ev == 1 && sup == 0, "one eviction counted (%ld, %ld)", ev, sup);
    CHECK(peek(c, B, 3) == 3 && peek(c, C, 3) == 3 && peek(c, D, 3) == 3, "B, C, D stay");

    /* restore refreshes: B becomes the newest, so C goes next */
    int len = 0, slot = srv_pcache_find(c, B, 3, &len);
    lilac_session *s = fed(NULL, 0);
    lilac_error e = {0};
    REQUIRE(s && slot >= 0, "find B");
    CHECK(srv_pcache_restore(c, slot, s, &e) == LILAC_OK, "%s", e.msg);
    lilac_session_free(s);
    store(c, E, N_(E), SRV_SNAP_GEN);
    CHECK(peek(c, C, 3) == -1, "C evicted after B was restored");
    CHECK(peek(c, B, 3) == 3 && peek(c, D, 3) == 3 && peek(c, E, 2) == 2, "B, D, E stay");

    /* find does not refresh: D is still the oldest */
    for (int i = 0; i < 5; i++) (void)peek(c, D, 3);
    store(c, F, N_(F), SRV_SNAP_GEN);
    CHECK(peek(c, D, 3) == -1, "D evicted although it was found (find leaves recency alone)");
    CHECK(peek(c, B, 3) == 3 && peek(c, E, 2) == 2 && peek(c, F, 2) == 2, "B, E, F stay");

    /* storing an equal snapshot refreshes it instead of taking a second slot */
    store(c, B, N_(B), SRV_SNAP_GEN); /* order now E, F, B */
    store(c, G, N_(G), SRV_SNAP_GEN);
    CHECK(peek(c, E, 2) == -1, "E evicted: B was refreshed by the equal store");
    CHECK(peek(c, B, 3) == 3 && peek(c, F, 2) == 2 && peek(c, G, 2) == 2, "B, F, G stay");
    srv_pcache_counts(c, &ev, &sup);
    CHECK(ev == 4 && sup == 0, "D..G evicted one each, the equal store none (%ld, %ld)", ev, sup);
    srv_pcache_free(c);
}

/* The end of a prompt drops the non-anchor snapshots it extends (their slots
 * are reused before any LRU eviction); anchors and ends of generations stay. */
static void test_prompt_supersedes(void) {
    const int32_t p2[] = {1, 2}, p4[] = {1, 2, 3, 4}, p6[] = {1, 2, 3, 4, 5, 6}, g8[] = {1, 2, 3, 4, 5, 6, 7, 8},
                  p9[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, q[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    srv_pcache *c = cache_of(3);
    REQUIRE(c, "no cache");
    store(c, A, N_(A), SRV_SNAP_GEN); /* an unrelated, old snapshot */
    store(c, p2, 2, SRV_SNAP_ANCHOR);
    store(c, p4, 4, SRV_SNAP_PROMPT);
    CHECK(peek(c, q, 10) == 4, "the prompt end is found");
    store(c, p6, 6, SRV_SNAP_PROMPT); /* supersedes p4, goes into its slot */
    CHECK(peek(c, p4, 4) == 2, "p4 was dropped; the anchor p2 is what is left of it");
    CHECK(peek(c, A, 3) == 3, "the dropped slot was reused: A was not evicted");
    CHECK(peek(c, q, 10) == 6, "p6 found");
    store(c, g8, 8, SRV_SNAP_GEN); /* an end of generation drops nothing: A (oldest) goes */
    CHECK(peek(c, q, 10) == 8 && peek(c, p6, 6) == 6 && peek(c, p2, 2) == 2, "g8, p6 and the anchor stay");
    CHECK(peek(c, A, 3) == -1, "A evicted by the generation end");
    store(c, p9, 9, SRV_SNAP_PROMPT); /* drops p6 and g8 (both non-anchor), keeps the anchor */
    CHECK(peek(c, q, 10) == 9 && peek(c, g8, 8) == 2 && peek(c, p6, 6) == 2, "p9 superseded p6 and g8");
    long ev = -1, sup = -1;
    srv_pcache_counts(c, &ev, &sup);
    CHECK(ev == 1 && sup == 3, "A evicted; p4, p6, g8 superseded (%ld, %ld)", ev, sup);
    srv_pcache_counts(NULL, &ev, &sup);
    CHECK(ev == 0 && sup == 0, "a NULL cache counts nothing");

    /* an equal anchor store marks an existing prompt end as an anchor */
    srv_pcache *d = cache_of(3);
    REQUIRE(d, "no cache");
    store(d, p2, 2, SRV_SNAP_PROMPT);
    store(d, p2, 2, SRV_SNAP_ANCHOR);
    store(d, p4, 4, SRV_SNAP_PROMPT);
    CHECK(peek(d, p2, 2) == 2 && peek(d, p4, 4) == 4, "p2 became an anchor and survived p4");
    srv_pcache_free(d);
    srv_pcache_free(c);
}

/* A prompt end equal to a stored snapshot still drops the non-anchor
 * snapshots it extends, in whichever slot order they lie (the drops used to
 * stop at the equal slot, so a prefix in a later slot survived). */
static void test_equal_prompt_drops_in_any_order(void) {
    const int32_t p2[] = {1, 2}, p3[] = {1, 2, 3}, q[] = {1, 2, 9};
    for (int order = 0; order < 2; order++) {
        srv_pcache *c = cache_of(3);
        REQUIRE(c, "no cache");
        if (order == 0) { /* slot 0: the generation end, slot 1: the shorter prompt end */
            store(c, p3, 3, SRV_SNAP_GEN);
            store(c, p2, 2, SRV_SNAP_PROMPT);
        } else {
            store(c, p2, 2, SRV_SNAP_PROMPT);
            store(c, p3, 3, SRV_SNAP_GEN);
        }
        CHECK(peek(c, q, 3) == 2, "order %d: p2 is there before", order);
        store(c, p3, 3, SRV_SNAP_PROMPT);
        CHECK(peek(c, p3, 3) == 3, "order %d: p3 stays", order);
        CHECK(peek(c, q, 3) == -1, "order %d: p2 (extended by the prompt end p3) was dropped", order);
        srv_pcache_free(c);
    }
}

/* Reusing a longer prefix refreshes the anchors inside it (the system turn
 * stays while a conversation restores its own later snapshots); other
 * snapshots and anchors that are not prefixes keep their age. */
static void test_touch_anchors(void) {
    const int32_t sys[] = {1, 2}, other[] = {5, 6}, q[] = {1, 2, 3, 4, 5};
    srv_pcache *c = cache_of(3);
    REQUIRE(c, "no cache");
    store(c, sys, 2, SRV_SNAP_ANCHOR);
    store(c, other, 2, SRV_SNAP_ANCHOR);
    store(c, q, 4, SRV_SNAP_GEN);
    srv_pcache_touch_anchors(c, q, 4); /* sys is a prefix of q[0..4): refreshed; other is not */
    store(c, A, N_(A), SRV_SNAP_GEN);  /* evicts the least recent: other */
    CHECK(peek(c, sys, 2) == 2, "the touched anchor stays");
    CHECK(peek(c, other, 2) == -1, "the untouched anchor was evicted");
    srv_pcache_touch_anchors(c, q, 1); /* too short to hold sys: nothing */
    store(c, B, N_(B), SRV_SNAP_GEN);  /* the least recent is now q[0..4) (stored before the touch), not sys */
    CHECK(peek(c, sys, 2) == 2 && peek(c, q, 5) == 2, "q[0..4) evicted, sys stays");
    srv_pcache_touch_anchors(NULL, q, 4);
    srv_pcache_touch_anchors(c, NULL, 4);
    srv_pcache_free(c);
}

static void test_bad_inputs(void) {
    lilac_error e = {0};
    int len = 5;
    CHECK(srv_pcache_find(NULL, A, 3, &len) == -1 && len == 0, "find in no cache");
    srv_pcache_free(NULL);

    srv_pcache *c = cache_of(2);
    REQUIRE(c, "no cache");
    len = 5;
    CHECK(srv_pcache_find(c, A, 3, &len) == -1 && len == 0, "empty cache");
    store(c, A, N_(A), SRV_SNAP_GEN);
    len = 5;
    CHECK(srv_pcache_find(c, A, 0, &len) == -1 && len == 0, "n = 0");
    CHECK(srv_pcache_find(c, A, -4, &len) == -1 && len == 0, "n < 0");
    CHECK(srv_pcache_find(c, NULL, 0, &len) == -1 && len == 0, "NULL ids, n = 0");
    CHECK(srv_pcache_find(c, NULL, 3, &len) == -1 && len == 0, "NULL ids, n = 3");
    CHECK(srv_pcache_find(c, A, 3, NULL) >= 0, "NULL len still finds");

    lilac_session *s = fed(NULL, 0);
    REQUIRE(s, "session");
    CHECK(srv_pcache_restore(c, -1, s, &e) == LILAC_EINVAL, "slot -1");
    CHECK(srv_pcache_restore(c, 2, s, &e) == LILAC_EINVAL, "slot past the end");
    CHECK(srv_pcache_restore(c, 1, s, &e) == LILAC_EINVAL && strstr(e.msg, "slot"), "an empty slot: %s", e.msg);
    int slot = srv_pcache_find(c, A, 3, &len);
    CHECK(srv_pcache_restore(c, slot, NULL, &e) == LILAC_EINVAL, "restore into NULL");
    CHECK(srv_pcache_restore(NULL, 0, s, &e) == LILAC_EINVAL, "restore from no cache");

    /* an empty session is not stored; NULLs are refused */
    CHECK(srv_pcache_store(c, s, SRV_SNAP_PROMPT, &e) == LILAC_OK, "empty session: %s", e.msg);
    CHECK(srv_pcache_find(c, A, 3, &len) == slot && len == 3, "A untouched");
    CHECK(srv_pcache_store(c, NULL, SRV_SNAP_PROMPT, &e) == LILAC_EINVAL, "store NULL");
    CHECK(srv_pcache_store(NULL, s, SRV_SNAP_PROMPT, &e) == LILAC_EINVAL, "store into no cache");
    lilac_session_free(s);

    /* a session longer than the cache's context fails to store; the cache goes on */
    lilac_session *big = NULL;
    lilac_status st = lilac_session_new(eng, 2 * CTX, &big, &e);
    REQUIRE(st == LILAC_OK, "%s", e.msg);
    int32_t ids[CTX + 8];
    for (int i = 0; i < CTX + 8; i++) ids[i] = 100 + i;
    CHECK(lilac_session_feed(big, ids, CTX + 8, NULL, 0, &e) == LILAC_OK, "%s", e.msg);
    e.msg[0] = 0;
    CHECK(srv_pcache_store(c, big, SRV_SNAP_GEN, &e) == LILAC_EINVAL && e.msg[0], "too long to keep: %s", e.msg);
    CHECK(peek(c, ids, CTX + 8) == -1, "the failed copy is not found");
    CHECK(peek(c, A, 3) == 3, "A (the other slot) is still there");
    lilac_session_free(big);
    store(c, B, N_(B), SRV_SNAP_GEN);
    CHECK(peek(c, A, 3) == 3 && peek(c, B, 3) == 3, "the failed slot is reused");
    srv_pcache_free(c);

    /* no slots: storing does nothing, nothing is found */
    srv_pcache *z = cache_of(0);
    REQUIRE(z, "no cache");
    store(z, A, N_(A), SRV_SNAP_PROMPT);
    CHECK(peek(z, A, 3) == -1, "a cache of 0 slots keeps nothing");
    srv_pcache_free(z);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    lilac_engine_opts o = {.model_dir = TINY, .backend = "cpu", .threads = 2};
    lilac_error e = {0};
    if (lilac_engine_open(&o, &eng, &e) != LILAC_OK) {
        CHECK(0, "open %s: %s", TINY, e.msg);
        return check_done("prefix_cache");
    }
    RUN(test_find_longest_prefix);
    RUN(test_restore_is_exact);
    RUN(test_lru_eviction);
    RUN(test_prompt_supersedes);
    RUN(test_equal_prompt_drops_in_any_order);
    RUN(test_touch_anchors);
    RUN(test_bad_inputs);
    lilac_engine_close(eng);
    return check_done("prefix_cache");
}
