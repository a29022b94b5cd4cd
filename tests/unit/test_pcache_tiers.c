/* test_pcache_tiers.c — the prefix cache's tiers below the slots
 * (src/server/pcache_ram.c, pcache_disk.c, prefix_cache.c) on the tiny
 * model, CPU backend: a snapshot the slots evict comes back from RAM, and
 * once RAM's bound pushed it out, from disk (longest prefix first, RAM on a
 * tie); the RAM tier never holds more than its bound and skips snapshots
 * larger than it; RAM and the slots do not hold the same snapshot twice;
 * the shutdown writes what RAM held, and a new cache finds it on disk; what
 * a prompt end supersedes waits in RAM for one step and is never written; a
 * session restored through either tier generates exactly (greedy tokens and
 * every logit, bit for bit) what a cold session fed the same tokens does;
 * per-tier counters follow; bad arguments find nothing. */
#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "session_fed.h"
#include "lilac.h"
#include "server/pcache_tiers.h"

#define TINY "tests/fixtures/tiny"
#define CTX 64
#define L 8 /* tokens of the test snapshots */

static lilac_engine *eng;
static uint64_t S; /* bytes of one L-token snapshot */

static lilac_session *fed(const int32_t *ids, int n) { return session_fed(eng, CTX, ids, n); }

static srv_pcache *cache_of(int slots, uint64_t ram, const char *dir) {
    srv_pcache *c = NULL;
    lilac_error e = {0};
    CHECK(srv_pcache_new(eng, slots, CTX, &c, &e) == LILAC_OK && c, "new cache: %s", e.msg);
    if (!c) return NULL;
    srv_pcache_set_log(c, "test_pcache_tiers", 0);
    srv_pcache_set_ram(c, ram);
    if (dir) {
        lilac_status st = srv_pcache_open_dir(c, dir, (uint64_t)1 << 30, &e);
        CHECK(st == LILAC_OK, "open_dir %s: %s", dir, e.msg);
    }
    return c;
}

static void store(srv_pcache *c, const int32_t *ids, int n, srv_snap k) {
    lilac_session *s = fed(ids, n);
    if (!s) return;
    lilac_error e = {0};
    CHECK(srv_pcache_store(c, s, k, &e) == LILAC_OK, "store %d tokens: %s", n, e.msg);
    lilac_session_free(s);
}

/* Sequence k: L tokens, distinct first token per k. */
static void seq(int k, int32_t *out) {
    for (int i = 0; i < L; i++) out[i] = 10 + 17 * k + i;
}

/* What reuse would find for q[0..n): the slots first, then the lower tiers
 * (as the worker asks).  Returns the prefix length, its tier in *tier; the
 * slot it names is checked to hold q[0..len). */
static int lookup(srv_pcache *c, const int32_t *q, int n, srv_tier *tier) {
    int len = 0, slot = srv_pcache_find(c, q, n, &len);
    *tier = SRV_TIER_DEVICE;
    int dlen = 0;
    srv_tier from = SRV_TIER_N;
    int dslot = srv_pcache_fetch(c, q, n, len, &dlen, &from);
    if (dslot >= 0) {
        CHECK(from == SRV_TIER_RAM || from == SRV_TIER_DISK, "fetch names tier %d", (int)from);
        slot = dslot, len = dlen, *tier = from;
    }
    if (slot < 0) return -1;
    lilac_session *d = fed(NULL, 0);
    lilac_error e = {0};
    if (!d) return -2;
    CHECK(srv_pcache_restore(c, slot, d, &e) == LILAC_OK, "restore slot %d: %s", slot, e.msg);
    CHECK(lilac_session_len(d) == len && memcmp(lilac_session_tokens(d), q, (size_t)len * sizeof *q) == 0,
          "slot %d holds %d tokens, expected a prefix of %d", slot, lilac_session_len(d), len);
    lilac_session_free(d);
    return len;
}

/* find() in the slots only, without restoring. */
static int peek_len(srv_pcache *c, const int32_t *q, int n) {
    int len = 0;
    return srv_pcache_find(c, q, n, &len) >= 0 ? len : -1;
}

static char *make_dir(void) {
    char tmpl[] = "/tmp/lilac-pcache-tiers-XXXXXX";
    char *d = mkdtemp(tmpl);
    CHECK(d != NULL, "mkdtemp");
    return d ? strdup(d) : NULL;
}

static void remove_dir(char *dir) {
    if (!dir) return;
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[4200];
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    rmdir(dir);
    free(dir);
}

/* One slot, RAM for two snapshots, a directory: the slots' evictions go to
 * RAM, RAM's to disk; each comes back from where it is. */
static void test_evict_slot_ram_disk(void) {
    char *dir = make_dir();
    srv_pcache *c = cache_of(1, 2 * S + S / 2, dir);
    REQUIRE(c && dir, "setup");
    int32_t a[L], b[L], x[L], d[L], q[L + 3];
    seq(0, a), seq(1, b), seq(2, x), seq(3, d);
    store(c, a, L, SRV_SNAP_PROMPT);
    uint64_t bytes = 0;
    CHECK(srv_pcache_ram_count(c, &bytes) == 0 && srv_pcache_disk_count(c, NULL) == 0, "nothing below the slot yet");
    store(c, b, L, SRV_SNAP_PROMPT); /* a: slot -> RAM */
    CHECK(srv_pcache_ram_count(c, &bytes) == 1 && bytes == S, "a in RAM (%llu bytes, one is %llu)",
          (unsigned long long)bytes, (unsigned long long)S);
    CHECK(srv_pcache_disk_count(c, NULL) == 0, "nothing written while RAM has room");
    store(c, x, L, SRV_SNAP_PROMPT); /* b: slot -> RAM */
    CHECK(srv_pcache_ram_count(c, NULL) == 2 && srv_pcache_disk_count(c, NULL) == 0, "a, b in RAM");
    store(c, d, L, SRV_SNAP_PROMPT); /* x: slot -> RAM; a (least recent) RAM -> disk */
    CHECK(srv_pcache_ram_count(c, &bytes) == 2 && bytes == 2 * S, "b, x in RAM");
    CHECK(srv_pcache_disk_count(c, NULL) == 1, "a on disk");
    srv_tier_stats ts[SRV_TIER_N];
    srv_pcache_tier_stats(c, ts);
    CHECK(ts[SRV_TIER_DEVICE].evictions == 3 && ts[SRV_TIER_RAM].evictions == 1 && ts[SRV_TIER_DISK].evictions == 0,
          "evictions %ld/%ld/%ld", ts[0].evictions, ts[1].evictions, ts[2].evictions);
    CHECK(ts[SRV_TIER_RAM].snapshots == 2 && ts[SRV_TIER_RAM].bytes == 2 * S && ts[SRV_TIER_RAM].capacity == 2 * S + S / 2,
          "RAM tier stats");
    CHECK(ts[SRV_TIER_DISK].snapshots == 1 && ts[SRV_TIER_DISK].bytes == S && ts[SRV_TIER_DEVICE].snapshots == 1,
          "disk and device tier stats");

    srv_tier t;
    memcpy(q, b, sizeof b), q[L] = 1, q[L + 1] = 2, q[L + 2] = 3;
    CHECK(lookup(c, q, L + 3, &t) == L && t == SRV_TIER_RAM, "b comes back from RAM (tier %d)", (int)t);
    /* b left RAM; d (the slot it took) went in, pushing x (now the least recent image) to disk */
    CHECK(srv_pcache_ram_count(c, NULL) == 1 && srv_pcache_disk_count(c, NULL) == 2, "RAM %d, disk %d",
          srv_pcache_ram_count(c, NULL), srv_pcache_disk_count(c, NULL));
    memcpy(q, a, sizeof a);
    CHECK(lookup(c, q, L + 3, &t) == L && t == SRV_TIER_DISK, "a comes back from disk (tier %d)", (int)t);
    CHECK(lookup(c, q, L + 3, &t) == L && t == SRV_TIER_DEVICE, "then it is in the slot");
    memcpy(q, d, sizeof d);
    CHECK(lookup(c, q, L + 3, &t) == L && t == SRV_TIER_RAM, "d, evicted by b's fetch, is in RAM");
    memcpy(q, x, sizeof x);
    CHECK(lookup(c, q, L + 3, &t) == L && t == SRV_TIER_DISK, "x, pushed out of RAM, from disk (tier %d)", (int)t);
    int32_t none[L];
    seq(9, none);
    CHECK(lookup(c, none, L, &t) == -1, "an unknown prefix is nowhere");
    CHECK(lookup(c, q, L - 1, &t) == -1, "a query shorter than every snapshot finds nothing");
    srv_pcache_free(c);
    remove_dir(dir);
}

/* The longest prefix wins across tiers; RAM wins a tie with a file. */
static void test_longest_across_tiers(void) {
    char *dir = make_dir();
    srv_pcache *c = cache_of(1, 4 * S, dir);
    REQUIRE(c && dir, "setup");
    int32_t q[L + 4], other[L];
    seq(4, q);
    for (int i = L; i < L + 4; i++) q[i] = 200 + i;
    seq(5, other);
    store(c, q, L + 2, SRV_SNAP_GEN); /* the longer one, written to disk and out of RAM below */
    store(c, other, L, SRV_SNAP_GEN);  /* q[0..L+2) -> RAM */
    srv_pcache_free(c);                /* the shutdown writes the slot and RAM */
    c = cache_of(1, 4 * S, dir);
    REQUIRE(c, "reopen");
    CHECK(srv_pcache_disk_count(c, NULL) == 2 && srv_pcache_ram_count(c, NULL) == 0, "both on disk after a restart");
    store(c, q, L, SRV_SNAP_ANCHOR); /* a shorter prefix, */
    store(c, other, L, SRV_SNAP_GEN); /* pushed to RAM */
    srv_tier t;
    CHECK(lookup(c, q, L + 4, &t) == L + 2 && t == SRV_TIER_DISK, "the longer file beats the shorter image (tier %d)", (int)t);
    /* the same snapshot in RAM and on disk: RAM */
    store(c, other, L, SRV_SNAP_GEN); /* q[0..L+2) (now in the slot) -> RAM, and it is on disk too */
    CHECK(lookup(c, q, L + 4, &t) == L + 2 && t == SRV_TIER_RAM, "a tie goes to RAM (tier %d)", (int)t);
    srv_pcache_free(c);
    remove_dir(dir);
}

/* The RAM bound holds after every store; without a directory, what RAM
 * evicts is gone; a snapshot larger than the bound never enters RAM. */
static void test_ram_bound(void) {
    const uint64_t bound = 3 * S + S / 2;
    srv_pcache *c = cache_of(2, bound, NULL);
    REQUIRE(c, "setup");
    int32_t s[12][L];
    for (int k = 0; k < 12; k++) {
        seq(k, s[k]);
        store(c, s[k], L, SRV_SNAP_GEN);
        uint64_t bytes = 0;
        int n = srv_pcache_ram_count(c, &bytes);
        CHECK(bytes <= bound && n == (k < 2 ? 0 : k - 1 < 3 ? k - 1 : 3), "after %d stores: %d in RAM, %llu bytes", k + 1,
              n, (unsigned long long)bytes);
    }
    srv_tier_stats ts[SRV_TIER_N];
    srv_pcache_tier_stats(c, ts);
    CHECK(ts[SRV_TIER_DEVICE].evictions == 10 && ts[SRV_TIER_RAM].evictions == 7, "evictions %ld, %ld",
          ts[SRV_TIER_DEVICE].evictions, ts[SRV_TIER_RAM].evictions);
    srv_tier t;
    CHECK(lookup(c, s[0], L, &t) == -1, "the oldest, evicted from RAM with no directory, is gone");
    CHECK(lookup(c, s[8], L, &t) == L && t == SRV_TIER_RAM, "s8 in RAM");
    CHECK(lookup(c, s[11], L, &t) == L && t == SRV_TIER_DEVICE, "s11 in a slot");
    srv_pcache_free(c);

    /* a bound smaller than one snapshot: nothing enters RAM */
    c = cache_of(1, S - 1, NULL);
    REQUIRE(c, "setup");
    store(c, s[0], L, SRV_SNAP_GEN);
    store(c, s[1], L, SRV_SNAP_GEN);
    CHECK(srv_pcache_ram_count(c, NULL) == 0, "a snapshot larger than the RAM bound is not kept there");
    CHECK(lookup(c, s[0], L, &t) == -1, "and it is gone");
    srv_pcache_free(c);
}

/* An image back in a slot leaves RAM; storing a snapshot equal to an image
 * drops the image; touching an anchor in RAM keeps it there longer. */
static void test_exclusive_and_anchors(void) {
    srv_pcache *c = cache_of(1, 2 * S, NULL);
    REQUIRE(c, "setup");
    int32_t a[L], b[L], x[L], q[L + 2];
    seq(0, a), seq(1, b), seq(2, x);
    store(c, a, L, SRV_SNAP_ANCHOR);
    store(c, b, L, SRV_SNAP_GEN); /* a -> RAM */
    store(c, a, L, SRV_SNAP_GEN); /* equal to the image: b -> RAM, a's image dropped */
    CHECK(srv_pcache_ram_count(c, NULL) == 1, "one image (b): a is in the slot only");
    store(c, x, L, SRV_SNAP_GEN); /* a -> RAM again (as an anchor: the image's flag was kept) */
    CHECK(srv_pcache_ram_count(c, NULL) == 2, "a, b in RAM");
    /* a is older than b in RAM; touching it as an anchor inside a longer prompt makes it newer */
    memcpy(q, a, sizeof a), q[L] = 5, q[L + 1] = 6;
    srv_pcache_touch_anchors(c, q, L + 2);
    store(c, q, L + 2, SRV_SNAP_GEN); /* x -> RAM: the least recent image (b) goes */
    srv_tier t;
    CHECK(lookup(c, b, L, &t) == -1, "b evicted from RAM");
    CHECK(lookup(c, a, L, &t) == L && t == SRV_TIER_RAM, "the touched anchor stayed in RAM");
    srv_pcache_free(c);
}

/* Greedy tokens and all logits after a restore through RAM and through disk
 * equal a cold session's, bit for bit. */
static void test_restored_generation_is_exact(void) {
    const int32_t prefix[] = {3, 141, 59, 26, 53, 58, 97, 93, 238, 46, 264, 33, 83, 279, 50};
    const int32_t more[] = {288, 41, 97, 169, 399};
    const int P = (int)(sizeof prefix / sizeof *prefix), M = (int)(sizeof more / sizeof *more), G = 12;
    lilac_engine_info info;
    lilac_engine_get_info(eng, &info);
    const int V = info.vocab_size;
    lilac_session *cold = fed(prefix, P);
    float *a = malloc((size_t)V * M * sizeof *a), *b = malloc((size_t)V * M * sizeof *b);
    int32_t want[16], got[16];
    int nw = 0, ng = 0;
    lilac_error e = {0};
    REQUIRE(cold && a && b, "setup");
    lilac_session *tmp = fed(NULL, 0);
    REQUIRE(tmp, "session");
    CHECK(lilac_session_copy(tmp, cold, &e) == LILAC_OK, "%s", e.msg);
    CHECK(lilac_session_generate_greedy(tmp, G, 0, want, &nw, &e) == LILAC_OK && nw == G, "cold greedy: %s", e.msg);
    lilac_session_free(tmp);
    CHECK(lilac_session_feed(cold, more, M, b, 1, &e) == LILAC_OK, "%s", e.msg);

    for (int via = SRV_TIER_RAM; via <= SRV_TIER_DISK; via++) {
        /* RAM of one snapshot: the second eviction pushes the first to disk */
        char *dir = make_dir();
        srv_pcache *c = cache_of(1, lilac_snapshot_bytes(eng, P) + 1, dir);
        REQUIRE(c && dir, "cache");
        int32_t o1[L], o2[L];
        seq(7, o1), seq(8, o2);
        store(c, prefix, P, SRV_SNAP_PROMPT);
        store(c, o1, L, SRV_SNAP_GEN);
        if (via == SRV_TIER_DISK) store(c, o2, L, SRV_SNAP_GEN);
        int len = 0;
        srv_tier from = SRV_TIER_N;
        int slot = srv_pcache_fetch(c, prefix, P, 0, &len, &from);
        CHECK(slot >= 0 && len == P && (int)from == via, "via %s: slot %d len %d from %d", srv_tier_name[via], slot, len,
              (int)from);
        lilac_session *d = fed(NULL, 0);
        REQUIRE(d, "session");
        if (slot >= 0) CHECK(srv_pcache_restore(c, slot, d, &e) == LILAC_OK, "restore: %s", e.msg);
        lilac_session *g2 = fed(NULL, 0);
        REQUIRE(g2, "session");
        CHECK(lilac_session_copy(g2, d, &e) == LILAC_OK, "%s", e.msg);
        ng = 0;
        CHECK(lilac_session_generate_greedy(g2, G, 0, got, &ng, &e) == LILAC_OK && ng == G, "greedy: %s", e.msg);
        CHECK(ng == nw && memcmp(got, want, (size_t)G * sizeof *got) == 0, "via %s: greedy tokens differ from a cold run",
              srv_tier_name[via]);
        lilac_session_free(g2);
        CHECK(lilac_session_feed(d, more, M, a, 1, &e) == LILAC_OK, "%s", e.msg);
        size_t diff = 0;
        for (size_t i = 0; i < (size_t)V * M; i++) diff += memcmp(&a[i], &b[i], sizeof *a) != 0;
        CHECK(diff == 0, "via %s: %zu of %d logits differ from a cold session", srv_tier_name[via], diff, V * M);
        lilac_session_free(d);
        srv_pcache_free(c);
        remove_dir(dir);
    }
    free(a);
    free(b);
    lilac_session_free(cold);
}

/* The shutdown writes the images RAM held (and the slots); the files keep
 * the LRU order; a new cache indexes them.  A snapshot loaded from disk and
 * evicted again is not written twice. */
static void test_shutdown_writes_ram(void) {
    char *dir = make_dir();
    srv_pcache *c = cache_of(1, 8 * S, dir);
    REQUIRE(c && dir, "setup");
    int32_t s[4][L];
    for (int k = 0; k < 4; k++) seq(k, s[k]), store(c, s[k], L, SRV_SNAP_GEN);
    CHECK(srv_pcache_ram_count(c, NULL) == 3 && srv_pcache_disk_count(c, NULL) == 0, "three images, no file");
    srv_pcache_free(c);
    c = cache_of(1, 8 * S, dir);
    REQUIRE(c, "reopen");
    CHECK(srv_pcache_disk_count(c, NULL) == 4, "all four on disk after the shutdown (%d)", srv_pcache_disk_count(c, NULL));
    srv_tier t;
    CHECK(lookup(c, s[1], L, &t) == L && t == SRV_TIER_DISK, "s1 from disk after the restart");
    const long saves = c->saves;
    store(c, s[3], L, SRV_SNAP_GEN); /* s1 -> RAM (its file is there) */
    CHECK(srv_pcache_ram_count(c, NULL) == 1, "s1 in RAM");
    srv_pcache_set_ram(c, S); /* room for one: s1 leaves RAM next, and finds its file there */
    store(c, s[2], L, SRV_SNAP_GEN);
    CHECK(c->saves == saves, "no file written again (%ld writes)", c->saves - saves);
    srv_pcache_free(c);
    remove_dir(dir);
}

/* With RAM, what a prompt end supersedes waits there for one step (a tool
 * loop's previous request: a client that retries or edits its last step
 * starts from it); the chain's next prompt end drops it; it is never
 * written to disk, not when RAM evicts it, not at shutdown. */
static void test_superseded_steps_wait_in_ram(void) {
    char *dir = make_dir();
    srv_pcache *c = cache_of(4, 8 * S, dir);
    REQUIRE(c && dir, "setup");
    int32_t q[24];
    for (int i = 0; i < 24; i++) q[i] = 30 + i;
    store(c, q, 2, SRV_SNAP_ANCHOR); /* the system turn */
    store(c, q, 6, SRV_SNAP_PROMPT); /* request 1 */
    store(c, q, 9, SRV_SNAP_GEN);    /* its generation */
    store(c, q, 12, SRV_SNAP_PROMPT); /* request 2 extends both */
    CHECK(srv_pcache_ram_count(c, NULL) == 2, "the two superseded steps in RAM (%d)", srv_pcache_ram_count(c, NULL));
    srv_tier t;
    int32_t retry[12], edit[14];
    memcpy(retry, q, sizeof retry);
    retry[6] = 999; /* request 2 retried with another last step */
    memcpy(edit, q, sizeof edit);
    edit[10] = 998; /* the last tool result edited: the generation before it is still a prefix */
    CHECK(peek_len(c, retry, 12) == 2, "the slots alone have only the anchor");
    CHECK(srv_pcache_longest(c, retry, 12) == 6 && srv_pcache_longest(c, edit, 14) == 9, "RAM has the steps");
    CHECK(lookup(c, edit, 14, &t) == 9 && t == SRV_TIER_RAM, "an edited last step starts from the generation before it");
    /* request 3: request 1's prompt end goes; request 2's and the 9 (used: in a slot again) wait */
    store(c, q, 18, SRV_SNAP_PROMPT);
    int32_t back[18];
    memcpy(back, q, sizeof back);
    back[13] = 997;
    CHECK(srv_pcache_longest(c, back, 18) == 12, "request 2's prompt end waits in RAM");
    CHECK(srv_pcache_longest(c, retry, 12) == 2 && srv_pcache_longest(c, edit, 14) == 9,
          "request 1's prompt end is gone (%d, %d)", srv_pcache_longest(c, retry, 12), srv_pcache_longest(c, edit, 14));
    long ev, sup;
    srv_pcache_counts(c, &ev, &sup);
    CHECK(sup == 5, "superseded: 6 and 9, then 6 (in RAM), 9 and 12 (%ld)", sup);
    /* room for one small image: RAM's evictions drop the transient ones, unwritten */
    srv_pcache_set_ram(c, S);
    int32_t other[4][L];
    for (int k = 0; k < 4; k++) seq(9 + k, other[k]), store(c, other[k], L, SRV_SNAP_GEN);
    for (int i = 0; i < c->nr; i++) CHECK(c->ram[i].n == L, "a transient image stayed (%d tokens)", c->ram[i].n);
    srv_pcache_free(c);
    c = cache_of(4, 8 * S, dir);
    REQUIRE(c, "reopen");
    for (int i = 0; i < c->nd; i++) {
        const int n = c->disk[i].n;
        CHECK(!((n == 6 || n == 9 || n == 12) && pc_prefix(c->disk[i].tokens, n, q, 24)),
              "a superseded step (%d tokens) was written", n);
    }
    CHECK(srv_pcache_longest(c, q, 24) == 18, "the chain's prompt end was written (%d)", srv_pcache_longest(c, q, 24));
    srv_pcache_free(c);
    remove_dir(dir);

    /* without RAM, superseded snapshots are dropped (as test_prefix_cache checks) */
    c = cache_of(4, 0, NULL);
    REQUIRE(c, "setup");
    store(c, q, 6, SRV_SNAP_PROMPT);
    store(c, q, 12, SRV_SNAP_PROMPT);
    CHECK(srv_pcache_longest(c, retry, 12) == 0, "no RAM: the superseded step is gone");
    srv_pcache_free(c);
}

static void test_bad_inputs(void) {
    int len = 7;
    srv_tier t = SRV_TIER_DISK;
    const int32_t q[] = {1, 2, 3};
    CHECK(srv_pcache_fetch(NULL, q, 3, 0, &len, &t) == -1 && len == 0, "fetch from no cache");
    srv_pcache_set_ram(NULL, 5);
    srv_pcache_set_log(NULL, "x", 1);
    srv_pcache_hit(NULL, SRV_TIER_RAM, 3);
    srv_tier_stats ts[SRV_TIER_N];
    srv_pcache_tier_stats(NULL, ts);
    CHECK(ts[SRV_TIER_RAM].hits == 0 && ts[SRV_TIER_DISK].capacity == 0, "no cache, no counts");
    CHECK(srv_pcache_ram_count(NULL, NULL) == 0, "ram count of no cache");
    srv_pcache *c = cache_of(1, 4 * S, NULL);
    REQUIRE(c, "setup");
    len = 7;
    CHECK(srv_pcache_fetch(c, NULL, 3, 0, &len, &t) == -1 && len == 0, "NULL ids");
    CHECK(srv_pcache_fetch(c, q, 0, 0, &len, NULL) == -1, "n = 0");
    srv_pcache_hit(c, SRV_TIER_N, 3);
    srv_pcache_hit(c, (srv_tier)-1, 3);
    srv_pcache_hit(c, SRV_TIER_RAM, 0);
    srv_pcache_hit(c, SRV_TIER_RAM, 5);
    srv_pcache_tier_stats(c, ts);
    CHECK(ts[SRV_TIER_RAM].hits == 1 && ts[SRV_TIER_RAM].reused_tokens == 5 && ts[SRV_TIER_DEVICE].hits == 0,
          "only the valid hit counts");
    lilac_error e = {0};
    CHECK(srv_pcache_open_dir(c, NULL, 1, &e) == LILAC_EINVAL, "no directory");
    srv_pcache_free(c);
    CHECK(lilac_snapshot_write_file(NULL, 0, "/tmp/x", &e) == LILAC_EINVAL, "no image");
    CHECK(lilac_snapshot_write_file("not a snapshot image, no magic at all, long enough to pass the size check......"
                                    "................................................",
                                    120, "/tmp/x", &e) == LILAC_EINVAL,
          "bytes that are not an image: %s", e.msg);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    lilac_engine_opts o = {.model_dir = TINY, .backend = "cpu", .threads = 2};
    lilac_error e = {0};
    if (lilac_engine_open(&o, &eng, &e) != LILAC_OK) {
        CHECK(0, "open %s: %s", TINY, e.msg);
        return check_done("pcache_tiers");
    }
    S = lilac_snapshot_bytes(eng, L);
    RUN(test_evict_slot_ram_disk);
    RUN(test_longest_across_tiers);
    RUN(test_ram_bound);
    RUN(test_exclusive_and_anchors);
    RUN(test_restored_generation_is_exact);
    RUN(test_shutdown_writes_ram);
    RUN(test_superseded_steps_wait_in_ram);
    RUN(test_bad_inputs);
    lilac_engine_close(eng);
    return check_done("pcache_tiers");
}
