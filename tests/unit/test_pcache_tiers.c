/* test_pcache_tiers.c — the prefix cache's tiers below the slots
 * (src/server/pcache_ram.c, pcache_disk.c, prefix_cache.c) on the tiny
 * model, CPU backend: a snapshot the slots evict comes back from RAM, and
 * once RAM's bound pushed it out, from disk (longest prefix first, RAM on a
 * tie); the RAM tier never holds more than its bound and skips snapshots
 * larger than it; RAM and the slots do not hold the same snapshot twice;
 * the shutdown writes what RAM held, and a new cache finds it on disk; what
 * a prompt end supersedes waits in RAM for one step and is never written; a
 * session restored through either tier, and from disk after a restart,
 * generates exactly (greedy tokens and every logit, bit for bit) what a cold
 * session fed the same tokens does; corrupt and truncated files and RAM
 * images are ignored with a warning, never loaded; per-tier counters
 * follow; bad arguments find nothing.  Prints the snapshot size and the
 * save/restore wall times per snapshot of each tier (informational).
 *
 * test_gpu_pcache.c includes this file with PCACHE_GPU 1: the same checks
 * on the CUDA backend (or on LILAC_TEST_BACKEND), skipping, saying so,
 * without a usable GPU. */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "session_fed.h"
#include "lilac.h"
#include "server/pcache_tiers.h"

#ifndef PCACHE_GPU
#define PCACHE_GPU 0
#endif
#if PCACHE_GPU
#define SUITE "gpu_pcache"
#else
#define SUITE "pcache_tiers"
#endif

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
    srv_pcache_set_log(c, "test_" SUITE, 0);
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

/* d, restored holding ids[0..n), continues exactly as a cold session fed
 * ids does: G greedy tokens, then every logit of M more tokens, bit for bit. */
static void check_exact(lilac_session *d, const int32_t *ids, int n, const char *what) {
    static const int32_t more[] = {288, 41, 97, 169, 399};
    enum { M = (int)(sizeof more / sizeof *more), G = 12 };
    lilac_engine_info info;
    lilac_engine_get_info(eng, &info);
    const int V = info.vocab_size;
    float *a = malloc((size_t)V * M * sizeof *a), *b = malloc((size_t)V * M * sizeof *b);
    lilac_session *cold = fed(ids, n), *g1 = fed(NULL, 0), *g2 = fed(NULL, 0);
    int32_t want[G], got[G];
    int nw = 0, ng = 0;
    lilac_error e = {0};
    if (!a || !b || !cold || !g1 || !g2) {
        CHECK(0, "%s: setup", what);
        goto done;
    }
    CHECK(lilac_session_len(d) == n && memcmp(lilac_session_tokens(d), ids, (size_t)n * sizeof *ids) == 0,
          "%s: the restored session holds %d tokens, expected %d", what, lilac_session_len(d), n);
    CHECK(lilac_session_copy(g1, cold, &e) == LILAC_OK && lilac_session_copy(g2, d, &e) == LILAC_OK, "%s: copy: %s", what,
          e.msg);
    CHECK(lilac_session_generate_greedy(g1, G, 0, want, &nw, &e) == LILAC_OK && nw == G, "%s: cold greedy: %s", what, e.msg);
    CHECK(lilac_session_generate_greedy(g2, G, 0, got, &ng, &e) == LILAC_OK && ng == G, "%s: greedy: %s", what, e.msg);
    CHECK(ng == nw && memcmp(got, want, (size_t)G * sizeof *got) == 0, "%s: greedy tokens differ from a cold run", what);
    CHECK(lilac_session_feed(cold, more, M, b, 1, &e) == LILAC_OK && lilac_session_feed(d, more, M, a, 1, &e) == LILAC_OK,
          "%s: feed: %s", what, e.msg);
    size_t diff = 0;
    for (size_t i = 0; i < (size_t)V * M; i++) diff += memcmp(&a[i], &b[i], sizeof *a) != 0;
    CHECK(diff == 0, "%s: %zu of %d logits differ from a cold session", what, diff, V * M);
done:
    lilac_session_free(g2);
    lilac_session_free(g1);
    lilac_session_free(cold);
    free(b);
    free(a);
}

static double wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* The tiers' own wall times per snapshot (informational). */
static void print_times(const srv_pcache *c, const char *what, uint64_t bytes, double fetch_ms, double copy_ms) {
    printf("    %-8s snapshot %llu bytes (%.1f KiB); RAM save %.3f ms (n=%ld), RAM restore %.3f ms (n=%ld); disk save %.3f ms "
           "(n=%ld), disk restore %.3f ms (n=%ld) per snapshot; fetch %.3f ms + copy to the session %.3f ms\n",
           what, (unsigned long long)bytes, bytes / 1024.0, c->ram_saves ? c->ram_save_ms / c->ram_saves : 0, c->ram_saves,
           c->ram_loads ? c->ram_load_ms / c->ram_loads : 0, c->ram_loads, c->saves ? c->save_ms / c->saves : 0, c->saves,
           c->loads ? c->load_ms / c->loads : 0, c->loads, fetch_ms, copy_ms);
}

/* Greedy tokens and all logits after a restore through RAM, through disk,
 * and from disk after a restart (a new cache on the directory), equal a
 * cold session's, bit for bit. */
static void test_restored_generation_is_exact(void) {
    const int32_t prefix[] = {3, 141, 59, 26, 53, 58, 97, 93, 238, 46, 264, 33, 83, 279, 50};
    const int P = (int)(sizeof prefix / sizeof *prefix);
    const uint64_t bytes = lilac_snapshot_bytes(eng, P);
    static const char *const name[] = {"ram", "disk", "restart"};
    static const srv_tier want[] = {SRV_TIER_RAM, SRV_TIER_DISK, SRV_TIER_DISK};
    for (int via = 0; via < 3; via++) {
        /* RAM of one snapshot: the second eviction pushes the first to disk */
        char *dir = make_dir();
        srv_pcache *c = cache_of(1, bytes + 1, dir);
        REQUIRE(c && dir, "cache");
        int32_t o1[L], o2[L];
        seq(7, o1), seq(8, o2);
        store(c, prefix, P, SRV_SNAP_PROMPT);
        store(c, o1, L, SRV_SNAP_GEN);
        if (via == 1) store(c, o2, L, SRV_SNAP_GEN);
        if (via == 2) { /* the shutdown writes RAM (the prefix) and the slot; a new cache finds them */
            const double t0 = wall_ms();
            srv_pcache_free(c);
            printf("    restart  the shutdown wrote 2 snapshots in %.3f ms\n", wall_ms() - t0);
            c = cache_of(1, bytes + 1, dir);
            REQUIRE(c, "reopen");
            CHECK(srv_pcache_disk_count(c, NULL) == 2 && srv_pcache_ram_count(c, NULL) == 0, "restart: %d files",
                  srv_pcache_disk_count(c, NULL));
        }
        int len = 0;
        srv_tier from = SRV_TIER_N;
        double t0 = wall_ms();
        int slot = srv_pcache_fetch(c, prefix, P, 0, &len, &from);
        const double fetch_ms = wall_ms() - t0;
        CHECK(slot >= 0 && len == P && from == want[via], "via %s: slot %d len %d from %d", name[via], slot, len, (int)from);
        lilac_session *d = fed(NULL, 0);
        REQUIRE(d, "session");
        lilac_error e = {0};
        t0 = wall_ms();
        if (slot >= 0) CHECK(srv_pcache_restore(c, slot, d, &e) == LILAC_OK, "restore: %s", e.msg);
        const double copy_ms = wall_ms() - t0;
        print_times(c, name[via], bytes, fetch_ms, copy_ms);
        char what[32];
        snprintf(what, sizeof what, "via %s", name[via]);
        check_exact(d, prefix, P, what);
        lilac_session_free(d);
        srv_pcache_free(c);
        remove_dir(dir);
    }
}

/* stderr into a file while the cache warns; stderr_end gives it back (and
 * echoes what was written, so the log still shows it). */
typedef struct {
    int saved;
    FILE *f;
} capture;

static capture stderr_begin(void) {
    capture k = {-1, tmpfile()};
    fflush(stderr);
    if (k.f && (k.saved = dup(2)) >= 0) dup2(fileno(k.f), 2);
    return k;
}

static char *stderr_end(capture k) {
    fflush(stderr);
    if (k.saved >= 0) dup2(k.saved, 2), close(k.saved);
    if (!k.f) return NULL;
    long n = ftell(k.f);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    rewind(k.f);
    if (s) s[fread(s, 1, (size_t)n, k.f)] = 0;
    fclose(k.f);
    if (s) fputs(s, stderr);
    return s;
}

/* The lines of log that name path. */
static int lines_naming(const char *log, const char *path) {
    int n = 0;
    for (const char *p = log; p && (p = strstr(p, path)); p += strlen(path)) n++;
    return n;
}

static int file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static off_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : -1;
}

/* Flips one byte of the state (just before the trailing checksum). */
static int corrupt_file(const char *path) {
    const off_t n = file_size(path);
    int fd = open(path, O_RDWR);
    unsigned char x;
    int ok = fd >= 0 && n > 16 && pread(fd, &x, 1, n - 12) == 1 && (x ^= 0x5a, pwrite(fd, &x, 1, n - 12) == 1);
    if (fd >= 0) close(fd);
    return ok;
}

static int write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(p, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = 0;
    return ok;
}

/* Corrupt and truncated snapshot files, and a corrupt RAM image, are
 * ignored with a warning naming them and never loaded: a file whose size
 * is not its header's (truncated before the cache opens the directory) is
 * left out of the index and left alone, as are files that are not
 * snapshots; one that fails when loaded (a flipped state byte: the
 * checksum; truncated after the index was read) is deleted; a corrupt RAM
 * image is dropped and its file (when there is one) serves instead.  What
 * is restored afterwards is exact. */
static void test_bad_files_ignored(void) {
    char *dir = make_dir();
    srv_pcache *c = cache_of(1, 8 * S, dir);
    REQUIRE(c && dir, "setup");
    int32_t s[8][L];
    for (int k = 0; k < 8; k++) seq(k, s[k]);
    for (int k = 0; k < 4; k++) store(c, s[k], L, SRV_SNAP_GEN);
    srv_pcache_free(c); /* four files */
    char path[4][4200], junk[4200], shorty[4200];
    int found = 0;
    DIR *dd = opendir(dir);
    struct dirent *de;
    while (dd && (de = readdir(dd))) {
        if (de->d_name[0] == '.') continue;
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        lilac_snap_info info;
        int32_t *t = NULL;
        lilac_error e = {0};
        if (lilac_snapshot_peek_file(eng, p, &info, &t, &e) == LILAC_OK && info.n_tokens == L) {
            const int k = (t[0] - 10) / 17;
            if (k >= 0 && k < 4 && !memcmp(t, s[k], sizeof s[k])) snprintf(path[k], sizeof path[k], "%s", p), found |= 1 << k;
        }
        free(t);
    }
    if (dd) closedir(dd);
    REQUIRE(found == 15, "the shutdown wrote the four snapshots (found mask %x)", found);
    /* s0 intact; s1 corrupt; s2 truncated now; s3 truncated once indexed */
    CHECK(corrupt_file(path[1]), "corrupt %s", path[1]);
    const off_t full = file_size(path[2]);
    CHECK(truncate(path[2], full - 100) == 0, "truncate %s", path[2]);
    snprintf(junk, sizeof junk, "%s/0123456789abcdef.lsnap", dir);
    snprintf(shorty, sizeof shorty, "%s/fedcba9876543210.lsnap", dir);
    char garbage[600];
    memset(garbage, 'x', sizeof garbage);
    CHECK(write_bytes(junk, garbage, sizeof garbage), "write %s", junk);
    unsigned char head[40];
    FILE *f = fopen(path[0], "rb");
    CHECK(f && fread(head, 1, sizeof head, f) == sizeof head, "read %s", path[0]);
    if (f) fclose(f);
    CHECK(write_bytes(shorty, head, sizeof head), "write %s", shorty); /* the start of a real header */

    capture k = stderr_begin();
    c = cache_of(1, 8 * S, dir);
    if (!c) {
        free(stderr_end(k));
        remove_dir(dir);
        return;
    }
    const int indexed = srv_pcache_disk_count(c, NULL);
    CHECK(truncate(path[3], file_size(path[3]) / 2) == 0, "truncate %s", path[3]);
    srv_tier t;
    const int l1 = lookup(c, s[1], L, &t), l3 = lookup(c, s[3], L, &t), l2 = lookup(c, s[2], L, &t);
    const int after = srv_pcache_disk_count(c, NULL);
    /* s0 from disk, exact */
    int len = 0;
    srv_tier from = SRV_TIER_N;
    int slot = srv_pcache_fetch(c, s[0], L, 0, &len, &from);
    lilac_session *d = fed(NULL, 0);
    lilac_error e = {0};
    const int r0 = slot >= 0 && d && srv_pcache_restore(c, slot, d, &e) == LILAC_OK;
    /* RAM: s0's image (its file is there) corrupt: the file serves; s4's (no file): nothing */
    store(c, s[4], L, SRV_SNAP_GEN); /* s0 -> RAM */
    int i0 = pc_ram_find(c, s[0], L);
    if (i0 >= 0) c->ram[i0].img[c->ram[i0].bytes - 12] ^= 0x5a;
    int len0 = 0;
    srv_tier from0 = SRV_TIER_N;
    int slot0 = srv_pcache_fetch(c, s[0], L, 0, &len0, &from0); /* s4 -> RAM */
    lilac_session *d0 = fed(NULL, 0);
    const int r00 = slot0 >= 0 && d0 && srv_pcache_restore(c, slot0, d0, &e) == LILAC_OK;
    store(c, s[5], L, SRV_SNAP_GEN); /* s0 -> RAM (on disk) */
    int i4 = pc_ram_find(c, s[4], L);
    if (i4 >= 0) c->ram[i4].img[c->ram[i4].bytes - 12] ^= 0x5a;
    const int l4 = lookup(c, s[4], L, &t);
    char *log = stderr_end(k);

    CHECK(indexed == 3, "s0, s1 and s3 indexed, not the truncated s2 or the non-snapshots (%d files)", indexed);
    CHECK(l1 == -1 && l3 == -1 && l2 == -1, "bad files never load: s1 %d, s3 %d, s2 %d", l1, l3, l2);
    CHECK(after == 1, "the two that failed to load left the index (%d files)", after);
    CHECK(slot >= 0 && len == L && from == SRV_TIER_DISK && r0, "s0 from disk: slot %d len %d tier %d: %s", slot, len,
          (int)from, e.msg);
    if (r0) check_exact(d, s[0], L, "s0 after the bad files");
    CHECK(i0 >= 0 && slot0 >= 0 && len0 == L && from0 == SRV_TIER_DISK && r00,
          "a corrupt RAM image: its file serves (image %d, slot %d, len %d, tier %d)", i0, slot0, len0, (int)from0);
    if (r00) check_exact(d0, s[0], L, "s0 from its file after a corrupt image");
    CHECK(i4 >= 0 && l4 == -1, "a corrupt RAM image with no file: nothing (image %d, found %d)", i4, l4);
    CHECK(log != NULL, "captured stderr");
    if (log) {
        CHECK(lines_naming(log, path[1]) == 1 && strstr(log, "checksum"), "one warning names the corrupt %s", path[1]);
        CHECK(lines_naming(log, path[2]) == 1, "one warning names the truncated %s", path[2]);
        CHECK(lines_naming(log, path[3]) == 1, "one warning names %s, truncated after the index", path[3]);
        CHECK(lines_naming(log, junk) == 1 && lines_naming(log, shorty) == 1, "one warning each for the non-snapshots");
        CHECK(strstr(log, "dropped a snapshot from RAM") != NULL, "a warning for the corrupt RAM images");
        int nwarn = 0;
        for (const char *p = log; (p = strstr(p, "warning: prefix cache:")); p++) nwarn++;
        CHECK(nwarn == 7, "seven warnings, one per bad file or image (%d)", nwarn);
    }
    CHECK(!file_exists(path[1]) && !file_exists(path[3]), "the files that failed to load are deleted");
    CHECK(file_exists(path[2]) && file_exists(junk) && file_exists(shorty), "files the index skipped are left alone");
    CHECK(file_exists(path[0]), "the good file stays");
    free(log);
    lilac_session_free(d0);
    lilac_session_free(d);
    srv_pcache_free(c);
    remove_dir(dir);
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
    const char *be = "cpu";
#if PCACHE_GPU
    be = getenv("LILAC_TEST_BACKEND");
    if (!be || !*be) be = "cuda";
#endif
    lilac_engine_opts o = {.model_dir = TINY, .backend = be, .threads = 2};
    lilac_error e = {0};
    if (lilac_engine_open(&o, &eng, &e) != LILAC_OK) {
#if PCACHE_GPU
        SKIP("%s", e.msg);
#else
        CHECK(0, "open %s: %s", TINY, e.msg);
#endif
        return check_done(SUITE);
    }
    lilac_engine_info info;
    lilac_engine_get_info(eng, &info);
    printf("    %s backend%s%s\n", info.backend, info.device ? ", " : "", info.device ? info.device : "");
    S = lilac_snapshot_bytes(eng, L);
    RUN(test_evict_slot_ram_disk);
    RUN(test_longest_across_tiers);
    RUN(test_ram_bound);
    RUN(test_exclusive_and_anchors);
    RUN(test_restored_generation_is_exact);
    RUN(test_bad_files_ignored);
    RUN(test_shutdown_writes_ram);
    RUN(test_superseded_steps_wait_in_ram);
    RUN(test_bad_inputs);
    lilac_engine_close(eng);
    return check_done(SUITE);
}
