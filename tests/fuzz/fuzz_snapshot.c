/* fuzz_snapshot.c — libFuzzer target: any bytes as a snapshot stream, loaded
 * into a session of the tiny model (CPU).  A load must fail cleanly or
 * succeed; either way the session stays usable.  With LILAC_SNAP_SEED=PATH,
 * initialisation writes a valid snapshot there first (tests/fuzz/run.sh
 * seeds the corpus with it). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lilac.h"

static lilac_engine *eng;
static lilac_session *sess;

typedef struct {
    const uint8_t *p;
    size_t n, off;
} mem;

static lilac_status mem_read(void *ctx, void *p, size_t n, lilac_error *e) {
    mem *m = ctx;
    if (n > m->n - m->off) {
        snprintf(e->msg, sizeof e->msg, "end of input");
        return e->code = LILAC_EFORMAT;
    }
    memcpy(p, m->p + m->off, n);
    m->off += n;
    return LILAC_OK;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    lilac_engine_opts o = {.model_dir = "tests/fixtures/tiny", .backend = "cpu", .threads = 1};
    lilac_error e = {0};
    if (lilac_engine_open(&o, &eng, &e) || lilac_session_new(eng, 64, &sess, &e)) {
        fprintf(stderr, "fuzz_snapshot: %s (run from the repository root)\n", e.msg);
        exit(1);
    }
    const char *seed = getenv("LILAC_SNAP_SEED");
    if (seed) {
        /* 48 positions: with their K/V the snapshot (about 290 KB) spans two of the
         * loader's 256 KiB hashing blocks, so mutations reach the block edge */
        int32_t ids[48];
        for (int i = 0; i < 48; i++) ids[i] = (int32_t)((i * 141 + 3) % 500);
        if (lilac_session_feed(sess, ids, 48, NULL, 0, &e) || lilac_session_save_file(sess, seed, 1, &e)) {
            fprintf(stderr, "fuzz_snapshot: seed: %s\n", e.msg);
            exit(1);
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mem m = {data, size, 0};
    lilac_error e = {0};
    uint32_t flags;
    if (lilac_session_load(sess, mem_read, &m, "fuzz", &flags, &e) != LILAC_OK) {
        if (lilac_session_len(sess) != 0) abort(); /* a failed load leaves the session empty */
        return 0;
    }
    const int32_t id = 7; /* a loaded session works */
    if (lilac_session_len(sess) < lilac_session_capacity(sess) && lilac_session_feed(sess, &id, 1, NULL, 0, &e)) abort();
    return 0;
}
