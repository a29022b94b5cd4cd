/* test_snapshot.c — snapshot files (src/engine/snapshot.c, the backends'
 * state_save/state_load) on the tiny model, CPU backend: XXH64 gives the
 * reference values; a saved and reloaded session (stream and file) continues
 * bit for bit like the original; every truncation we try and every random
 * corruption is rejected with one line naming the source, leaving the session
 * empty and usable; another model's snapshot, another format version and a
 * longer-than-the-session snapshot are rejected before any state is read;
 * file saves leave no temporary files. */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "session_fed.h"
#include "lilac.h"
#include "util/bigalloc.h"
#include "util/hash.h"

#define TINY "tests/fixtures/tiny"
#define CTX 64
#define N_(a) ((int)(sizeof(a) / sizeof *(a)))

static lilac_engine *eng;
static int V;

/* ---- memory streams */
typedef struct {
    unsigned char *p;
    size_t n, cap, off;
} mem;

static lilac_status mem_write(void *ctx, const void *p, size_t n, lilac_error *e) {
    mem *m = ctx;
    if (m->n + n > m->cap) {
        size_t cap = (m->n + n) * 2;
        unsigned char *q = realloc(m->p, cap);
        if (!q) return LILAC_ENOMEM;
        m->p = q, m->cap = cap;
    }
    memcpy(m->p + m->n, p, n);
    m->n += n;
    (void)e;
    return LILAC_OK;
}

static lilac_status mem_read(void *ctx, void *p, size_t n, lilac_error *e) {
    mem *m = ctx;
    if (n > m->n - m->off) {
        snprintf(e->msg, sizeof e->msg, "end of buffer");
        return e->code = LILAC_EFORMAT;
    }
    memcpy(p, m->p + m->off, n);
    m->off += n;
    return LILAC_OK;
}

static lilac_session *fed(const int32_t *ids, int n, int cap) { return session_fed(eng, cap, ids, n); }

static const int32_t P[] = {3, 141, 59, 26, 53, 58, 97, 93, 238, 46, 264, 33, 83, 279, 50, 28, 84, 197, 169, 399};
static const int32_t MORE[] = {288, 41, 97, 169, 399, 37};

/* s saved to a fresh buffer (flags 0x5a). */
static mem saved(const lilac_session *s) {
    mem m = {0};
    lilac_error e = {0};
    CHECK(lilac_session_save(s, 0x5a, mem_write, &m, &e) == LILAC_OK, "save: %s", e.msg);
    return m;
}

/* Loads buf[0..n) into s; returns the status, e receives the message. */
static lilac_status load_mem(lilac_session *s, const unsigned char *buf, size_t n, lilac_error *e) {
    mem r = {(unsigned char *)buf, n, n, 0};
    uint32_t flags = 0;
    return lilac_session_load(s, mem_read, &r, "mem", &flags, e);
}

typedef struct {
    lilac_token_info t[8];
    int n;
} tokens;

static int keep(void *ctx, const lilac_token_info *t) {
    tokens *k = ctx;
    if (k->n < 8) k->t[k->n++] = *t;
    return 0;
}

/* The next 6 greedy tokens of s with logprobs (top 20), and the logits of
 * every position after feeding MORE to a copy... : a fingerprint of s's
 * logits and state, compared bitwise. */
static int same_future(lilac_session *a, lilac_session *b, const char *what) {
    lilac_error e = {0};
    lilac_session *c[2] = {fed(NULL, 0, CTX), fed(NULL, 0, CTX)};
    float *lg[2] = {malloc((size_t)V * N_(MORE) * sizeof(float)), malloc((size_t)V * N_(MORE) * sizeof(float))};
    tokens k[2] = {{.n = 0}, {.n = 0}};
    int ok = c[0] && c[1] && lg[0] && lg[1];
    lilac_session *src[2] = {a, b};
    const lilac_gen_params gp = {.max_tokens = 6, .sampling = lilac_sampling_greedy(), .logprobs = 1,
                                 .top_logprobs = LILAC_MAX_TOP_LOGPROBS};
    for (int i = 0; ok && i < 2; i++) {
        int n_out = 0;
        lilac_finish why;
        ok = lilac_session_copy(c[i], src[i], &e) == LILAC_OK &&
             lilac_session_generate(c[i], &gp, keep, &k[i], &n_out, &why, &e) == LILAC_OK &&
             lilac_session_copy(c[i], src[i], &e) == LILAC_OK &&
             lilac_session_feed(c[i], MORE, N_(MORE), lg[i], 1, &e) == LILAC_OK;
        CHECK(ok, "%s: run %d: %s", what, i, e.msg);
    }
    int same = ok && k[0].n == 6 && k[1].n == 6 && memcmp(k[0].t, k[1].t, sizeof k[0].t) == 0 &&
               memcmp(lg[0], lg[1], (size_t)V * N_(MORE) * sizeof(float)) == 0 &&
               lilac_session_len(a) == lilac_session_len(b) &&
               memcmp(lilac_session_tokens(a), lilac_session_tokens(b), (size_t)lilac_session_len(a) * 4) == 0;
    lilac_session_free(c[0]);
    lilac_session_free(c[1]);
    free(lg[0]);
    free(lg[1]);
    return same;
}

static void test_hash_vectors(void) {
    /* XXH64 reference values (seed 0) */
    CHECK(lilac_hash64("", 0, 0) == 0xEF46DB3751D8E999ULL, "empty: %016llx", (unsigned long long)lilac_hash64("", 0, 0));
    CHECK(lilac_hash64("abc", 3, 0) == 0x44BC2CF5AD770999ULL, "abc");
    const char *s = "Nobody inspects the spammish repetition";
    CHECK(lilac_hash64(s, strlen(s), 0) == 0xFBCEA83C8A378BF1ULL, "39 bytes: %016llx",
          (unsigned long long)lilac_hash64(s, strlen(s), 0));
    /* many stripes, then an 8-, a 4- and 1-byte tail (values of an independent XXH64) */
    unsigned char buf[1007];
    for (int i = 0; i < (int)sizeof buf; i++) buf[i] = (unsigned char)(i * 131 + 7);
    CHECK(lilac_hash64(buf, 1007, 0) == 0x3B58C970CFD980F8ULL, "1007 bytes: %016llx",
          (unsigned long long)lilac_hash64(buf, 1007, 0));
    CHECK(lilac_hash64(buf, 1007, 9) == 0x088F2247D1D3F637ULL, "1007 bytes, seed 9");
    CHECK(lilac_hash64(buf, 1000, 9) == 0x2578C9881CB00EFCULL, "1000 bytes, seed 9");
    /* streaming in uneven pieces (empty ones, pieces across and within stripes) equals one shot */
    for (size_t first = 0; first < 70; first += 7) {
        lilac_hash h;
        lilac_hash_init(&h, 9);
        lilac_hash_update(&h, buf, first);
        for (size_t off = first, i = 0, k = 0; off < 1000; off += k, k = i++ * 13 % 71) /* k: 0, 13, 26, ..., 0, ... */
            lilac_hash_update(&h, buf + off, off + k > 1000 ? 1000 - off : k);
        CHECK(lilac_hash_final(&h) == 0x2578C9881CB00EFCULL, "streamed after %zu bytes", first);
    }
    /* unaligned starts */
    for (int a = 1; a < 8; a++) {
        unsigned char *q = malloc(1000 + 8);
        REQUIRE(q, "malloc");
        memcpy(q + a, buf, 1000);
        CHECK(lilac_hash64(q + a, 1000, 9) == 0x2578C9881CB00EFCULL, "at offset %d", a);
        free(q);
    }
}

/* The RAM tier's images: mapped with their pages from 1 MiB, malloc below; every byte writable. */
static void test_big_alloc(void) {
    const size_t sizes[] = {1, 4096, ((size_t)1 << 20) - 1, (size_t)1 << 20, ((size_t)9 << 20) + 123};
    for (int i = 0; i < N_(sizes); i++) {
        unsigned char *p = lilac_big_alloc(sizes[i]);
        REQUIRE(p, "%zu bytes", sizes[i]);
        memset(p, 0xa5, sizes[i]);
        CHECK(p[0] == 0xa5 && p[sizes[i] - 1] == 0xa5, "%zu bytes", sizes[i]);
        lilac_big_free(p, sizes[i]);
    }
    lilac_big_free(NULL, 0);
}

static void test_round_trip(void) {
    lilac_session *a = fed(P, N_(P), CTX), *b = fed(MORE, 3, CTX), *big = fed(NULL, 0, 2 * CTX);
    REQUIRE(a && b && big, "setup");
    mem m = saved(a);
    CHECK(m.n == lilac_snapshot_bytes(eng, N_(P)), "size %zu, expected %llu", m.n,
          (unsigned long long)lilac_snapshot_bytes(eng, N_(P)));
    lilac_error e = {0};
    mem r = {m.p, m.n, m.n, 0};
    uint32_t flags = 0;
    CHECK(lilac_session_load(b, mem_read, &r, "mem", &flags, &e) == LILAC_OK, "load: %s", e.msg);
    CHECK(flags == 0x5a && r.off == m.n, "flags %x, read %zu of %zu", flags, r.off, m.n);
    CHECK(same_future(a, b, "stream"), "a reloaded session continues exactly like the original");

    /* files, into a session of another capacity */
    char dir[] = "/tmp/lilac_snapXXXXXX", path[256];
    char *made = mkdtemp(dir); /* REQUIRE evaluates its condition twice */
    REQUIRE(made, "mkdtemp");
    snprintf(path, sizeof path, "%s/a.lsnap", dir);
    CHECK(lilac_session_save_file(a, path, 7, &e) == LILAC_OK, "save_file: %s", e.msg);
    CHECK(lilac_session_load_file(big, path, &flags, &e) == LILAC_OK && flags == 7, "load_file: %s", e.msg);
    CHECK(same_future(a, big, "file"), "a file round trip is exact");
    lilac_snap_info info;
    int32_t *t = NULL;
    CHECK(lilac_snapshot_peek_file(eng, path, &info, &t, &e) == LILAC_OK, "peek: %s", e.msg);
    CHECK(t && info.n_tokens == N_(P) && info.flags == 7 && info.file_bytes == m.n && memcmp(t, P, sizeof P) == 0,
          "peek: %d tokens, flags %u", info.n_tokens, info.flags);
    free(t);
    /* saving again replaces the file atomically; no temporary file is left */
    CHECK(lilac_session_save_file(b, path, 8, &e) == LILAC_OK, "save over: %s", e.msg);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) -eq 1", dir);
    CHECK(system(cmd) == 0, "exactly one file in %s", dir);
    snprintf(path, sizeof path, "%s/no/such/dir.lsnap", dir);
    CHECK(lilac_session_save_file(a, path, 0, &e) == LILAC_EIO && strstr(e.msg, "no/such"), "save to a missing dir: %s", e.msg);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
    free(m.p);
    lilac_session_free(a);
    lilac_session_free(b);
    lilac_session_free(big);
}

/* After a rejected load the session is empty and works like a fresh one. */
static int empty_and_usable(lilac_session *s) {
    if (lilac_session_len(s) != 0) return 0;
    lilac_error e = {0};
    float *x = malloc((size_t)V * sizeof *x), *y = malloc((size_t)V * sizeof *y);
    lilac_session *f = fed(NULL, 0, CTX);
    int ok = x && y && f && lilac_session_feed(s, P, 4, x, 0, &e) == LILAC_OK &&
             lilac_session_feed(f, P, 4, y, 0, &e) == LILAC_OK && memcmp(x, y, (size_t)V * sizeof *x) == 0;
    free(x);
    free(y);
    lilac_session_free(f);
    return ok;
}

static void test_truncation(void) {
    lilac_session *a = fed(P, N_(P), CTX), *b = fed(MORE, 2, CTX);
    REQUIRE(a && b, "setup");
    mem m = saved(a);
    const size_t hdr_tok = LILAC_SNAP_HEADER + sizeof P + (size_t)V * 4;
    int tried = 0, bad = 0;
    /* every length through the header, tokens and logits and the last 64;
     * a stride through the state payload (every length would be quadratic) */
    for (size_t L = 0; L < m.n; L += (L < hdr_tok + 64 || L + 64 >= m.n) ? 1 : 97) {
        lilac_error e = {0};
        lilac_status st = load_mem(b, m.p, L, &e);
        tried++;
        if (st == LILAC_OK || lilac_session_len(b) != 0 || !strstr(e.msg, "mem")) {
            if (bad++ < 5) CHECK(0, "truncated to %zu of %zu: status %d, len %d, '%s'", L, m.n, st, lilac_session_len(b), e.msg);
        }
    }
    CHECK(bad == 0 && tried > 3000, "%d of %d truncations accepted", bad, tried);
    CHECK(empty_and_usable(b), "after the truncated loads");

    /* files: truncated and extended ones never load (peek says so too) */
    char dir[] = "/tmp/lilac_snapXXXXXX", path[256];
    char *made = mkdtemp(dir); /* REQUIRE evaluates its condition twice */
    REQUIRE(made, "mkdtemp");
    snprintf(path, sizeof path, "%s/t.lsnap", dir);
    const size_t lens[] = {0, 1, 8, 95, 96, 97, hdr_tok - 1, hdr_tok, m.n / 2, m.n - 9, m.n - 8, m.n - 1, m.n + 1, m.n + 4096};
    for (int i = 0; i < N_(lens); i++) {
        FILE *f = fopen(path, "wb");
        REQUIRE(f, "create %s", path);
        fwrite(m.p, 1, lens[i] < m.n ? lens[i] : m.n, f);
        for (size_t k = m.n; k < lens[i]; k++) fputc(0, f);
        fclose(f);
        lilac_error e = {0};
        uint32_t fl;
        CHECK(lilac_session_load_file(b, path, &fl, &e) == LILAC_EFORMAT && lilac_session_len(b) == 0 && strstr(e.msg, path),
              "file of %zu bytes: '%s'", lens[i], e.msg);
        lilac_snap_info info;
        int32_t *t = NULL;
        CHECK(lilac_snapshot_peek_file(eng, path, &info, &t, &e) != LILAC_OK && !t, "peek of %zu bytes", lens[i]);
    }
    lilac_error e = {0};
    uint32_t fl;
    snprintf(path, sizeof path, "%s/missing.lsnap", dir);
    CHECK(lilac_session_load_file(b, path, &fl, &e) == LILAC_EIO && strstr(e.msg, "missing"), "missing file: %s", e.msg);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
    free(m.p);
    lilac_session_free(a);
    lilac_session_free(b);
}

/* A session long enough that one attention layer's K (256 bytes a token on
 * the tiny model) spans several of the blocks the snapshot hashes and moves
 * at a time (256 KiB): saved and loaded through memory and a file it comes
 * back byte for byte, the stored checksum is XXH64 of the rest in one shot,
 * and a flipped byte or a cut deep inside a block is still rejected. */
static void test_long_session(void) {
    enum { LONG = 1100 };
    int32_t *ids = malloc(LONG * sizeof *ids);
    REQUIRE(ids, "alloc");
    for (int i = 0; i < LONG; i++) ids[i] = (i * 37 + 11) % V;
    lilac_session *a = fed(ids, LONG, LONG + 8), *b = fed(NULL, 0, LONG + 8);
    REQUIRE(a && b, "setup");
    mem m = saved(a);
    REQUIRE(m.n == lilac_snapshot_bytes(eng, LONG), "size %zu", m.n);
    uint64_t sum;
    memcpy(&sum, m.p + m.n - 8, 8);
    CHECK(sum == lilac_hash64(m.p, m.n - 8, 0), "the checksum is XXH64 of the file before it");
    lilac_error e = {0};
    CHECK(load_mem(b, m.p, m.n, &e) == LILAC_OK && lilac_session_len(b) == LONG, "load: %s", e.msg);
    mem again = saved(b);
    CHECK(again.n == m.n && memcmp(again.p, m.p, m.n) == 0, "saved again, the same bytes");
    free(again.p);
    /* a flip in the first K, past its first 256 KiB; cuts inside blocks */
    const size_t k0 = LILAC_SNAP_HEADER + 4 * (size_t)LONG + 4 * (size_t)V;
    const size_t flips[] = {k0 + 270000, k0 + 262143, k0 + 262144, m.n - 9};
    for (int i = 0; i < N_(flips); i++) {
        m.p[flips[i]] ^= 0x10;
        CHECK(load_mem(b, m.p, m.n, &e) == LILAC_EFORMAT && lilac_session_len(b) == 0 && strstr(e.msg, "checksum"),
              "byte %zu flipped: '%s'", flips[i], e.msg);
        m.p[flips[i]] ^= 0x10;
    }
    const size_t cuts[] = {k0 + 1, k0 + 262144, k0 + 262145, k0 + 270000, m.n / 2, m.n - 8};
    for (int i = 0; i < N_(cuts); i++)
        CHECK(load_mem(b, m.p, cuts[i], &e) == LILAC_EFORMAT && lilac_session_len(b) == 0 && strstr(e.msg, "mem"),
              "cut at %zu: '%s'", cuts[i], e.msg);
    CHECK(empty_and_usable(b), "after the bad loads");

    char dir[] = "/tmp/lilac_snapXXXXXX", path[256];
    char *made = mkdtemp(dir);
    REQUIRE(made, "mkdtemp");
    snprintf(path, sizeof path, "%s/long.lsnap", dir);
    CHECK(lilac_session_save_file(a, path, 0, &e) == LILAC_OK, "save_file: %s", e.msg);
    CHECK(lilac_session_load_file(b, path, NULL, &e) == LILAC_OK, "load_file: %s", e.msg);
    again = saved(b);
    CHECK(again.n == m.n && memcmp(again.p, m.p, m.n) == 0, "through a file, the same bytes");
    free(again.p);
    /* an image written as it is, in pieces of the early writeback (8 MiB) and a tail */
    const size_t big = ((size_t)17 << 20) + 4099;
    unsigned char *img = malloc(big), *back = malloc(big);
    REQUIRE(img && back, "alloc");
    memcpy(img, m.p, LILAC_SNAP_HEADER);
    for (size_t i = LILAC_SNAP_HEADER; i < big; i++) img[i] = (unsigned char)(i * 2654435761u >> 13);
    snprintf(path, sizeof path, "%s/img.lsnap", dir);
    CHECK(lilac_snapshot_write_file(img, big, path, &e) == LILAC_OK, "write_file: %s", e.msg);
    FILE *f = fopen(path, "rb");
    REQUIRE(f, "open %s", path);
    CHECK(fread(back, 1, big, f) == big && fgetc(f) == EOF && memcmp(img, back, big) == 0, "the file is the image");
    fclose(f);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
    free(img);
    free(back);
    free(m.p);
    free(ids);
    lilac_session_free(a);
    lilac_session_free(b);
}

static void test_corruption(void) {
    lilac_session *a = fed(P, N_(P), CTX), *b = fed(NULL, 0, CTX);
    REQUIRE(a && b, "setup");
    mem m = saved(a);
    unsigned char *c = malloc(m.n);
    REQUIRE(c, "alloc");
    uint64_t rng = 0x9e3779b97f4a7c15ULL;
    int bad = 0, n = 0;
    /* every header byte, then random bytes anywhere (one to four flips) */
    for (int it = 0; it < LILAC_SNAP_HEADER + 3000; it++, n++) {
        memcpy(c, m.p, m.n);
        int flips = it < LILAC_SNAP_HEADER ? 1 : 1 + (int)(rng >> 62);
        for (int k = 0; k < flips; k++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            size_t at = it < LILAC_SNAP_HEADER ? (size_t)it : (size_t)(rng >> 33) % m.n;
            c[at] ^= (unsigned char)(1 + (rng >> 20) % 255);
        }
        lilac_error e = {0};
        if (load_mem(b, c, m.n, &e) == LILAC_OK || lilac_session_len(b) != 0) {
            if (bad++ < 5) CHECK(0, "corruption %d accepted", it);
        }
    }
    CHECK(bad == 0, "%d of %d corrupted snapshots accepted", bad, n);
    CHECK(empty_and_usable(b), "after the corrupt loads");
    /* the messages say what is wrong */
    struct {
        size_t at;
        const char *msg;
    } cases[] = {{0, "not a lilac snapshot"}, {8, "format version"}, {16, "another model"}, {24, "state layout"},
                 {40, "tokens"}, {LILAC_SNAP_HEADER + 3, "outside the vocabulary"}, {m.n - 100, "checksum"}, {m.n - 1, "checksum"}};
    for (int i = 0; i < N_(cases); i++) {
        memcpy(c, m.p, m.n);
        c[cases[i].at] ^= 0x40;
        lilac_error e = {0};
        CHECK(load_mem(b, c, m.n, &e) == LILAC_EFORMAT && strstr(e.msg, cases[i].msg), "byte %zu: '%s' (wanted '%s')",
              cases[i].at, e.msg, cases[i].msg);
    }
    /* a snapshot longer than the session holds */
    lilac_session *small = fed(NULL, 0, 8);
    lilac_error e = {0};
    CHECK(small && load_mem(small, m.p, m.n, &e) == LILAC_EFORMAT && strstr(e.msg, "tokens"), "too long: %s", e.msg);
    lilac_session_free(small);
    free(c);
    free(m.p);
    lilac_session_free(a);
    lilac_session_free(b);
}

static void test_other_model(void) {
    lilac_engine_opts o = {.model_dir = TINY "/hf", .backend = "cpu", .threads = 2};
    lilac_engine *g2 = NULL;
    lilac_error e = {0};
    lilac_status gs = lilac_engine_open(&o, &g2, &e);
    REQUIRE(gs == LILAC_OK, "open %s/hf: %s", TINY, e.msg);
    CHECK(lilac_engine_model_id(g2) != lilac_engine_model_id(eng), "the bf16 copy is another model");
    lilac_session *x = NULL, *b = fed(P, 3, CTX);
    lilac_status xs = lilac_session_new(g2, CTX, &x, &e);
    REQUIRE(xs == LILAC_OK && b, "session: %s", e.msg);
    CHECK(lilac_session_feed(x, P, N_(P), NULL, 0, &e) == LILAC_OK, "feed: %s", e.msg);
    mem m = saved(x);
    CHECK(load_mem(b, m.p, m.n, &e) == LILAC_EFORMAT && strstr(e.msg, "another model") && lilac_session_len(b) == 0,
          "another model's snapshot: %s", e.msg);
    CHECK(empty_and_usable(b), "after the other model's snapshot");
    /* the same engine reopened has the same identity (snapshots survive restarts) */
    lilac_engine *g3 = NULL;
    lilac_engine_opts o3 = {.model_dir = TINY, .backend = "cpu", .threads = 1};
    lilac_status g3s = lilac_engine_open(&o3, &g3, &e);
    REQUIRE(g3s == LILAC_OK, "reopen: %s", e.msg);
    CHECK(lilac_engine_model_id(g3) == lilac_engine_model_id(eng), "identity is stable across opens");
    lilac_engine_close(g3);
    free(m.p);
    lilac_session_free(x);
    lilac_session_free(b);
    lilac_engine_close(g2);
}

static void test_bad_inputs(void) {
    lilac_session *s = fed(NULL, 0, CTX);
    lilac_error e = {0};
    mem m = {0};
    REQUIRE(s, "setup");
    CHECK(lilac_session_save(s, 0, mem_write, &m, &e) == LILAC_EINVAL && m.n == 0, "an empty session: %s", e.msg);
    CHECK(lilac_session_save(NULL, 0, mem_write, &m, &e) == LILAC_EINVAL, "NULL session");
    CHECK(lilac_session_save(s, 0, NULL, &m, &e) == LILAC_EINVAL, "NULL sink");
    CHECK(lilac_session_load(NULL, mem_read, &m, "x", NULL, &e) == LILAC_EINVAL, "NULL session");
    CHECK(lilac_session_load(s, NULL, &m, "x", NULL, &e) == LILAC_EINVAL, "NULL source");
    CHECK(lilac_session_load_file(s, NULL, NULL, &e) == LILAC_EINVAL, "NULL path");
    lilac_session_free(s);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    lilac_engine_opts o = {.model_dir = TINY, .backend = "cpu", .threads = 2};
    lilac_error e = {0};
    if (lilac_engine_open(&o, &eng, &e) != LILAC_OK) {
        CHECK(0, "open %s: %s", TINY, e.msg);
        return check_done("snapshot");
    }
    lilac_engine_info info;
    lilac_engine_get_info(eng, &info);
    V = info.vocab_size;
    RUN(test_hash_vectors);
    RUN(test_big_alloc);
    RUN(test_round_trip);
    RUN(test_truncation);
    RUN(test_long_session);
    RUN(test_corruption);
    RUN(test_other_model);
    RUN(test_bad_inputs);
    lilac_engine_close(eng);
    return check_done("snapshot");
}
