/* pcache_ram.c — the prefix cache's RAM tier (--cache-ram): snapshots the
 * slots evicted, kept in host memory as the bytes of their snapshot file.
 *
 * Why file images: the backend's state_save/state_load already move a
 * state to and from host memory in a checked layout, an image goes to disk
 * as it is when the RAM tier evicts it (no session in between), and loading
 * one checks the same checksum as loading a file.  An image costs what its
 * file does (tokens, logits, the state up to its position), not a whole
 * --ctx session.
 *
 * The tier is exclusive: an image loaded back into a slot leaves RAM (the
 * slot has it; its eviction puts it back), and storing a snapshot equal to
 * an image drops the image.  The least recently used images leave when the
 * tier holds more than ram_max bytes: written to the directory when there
 * is one and it lacks them, else dropped.  A snapshot larger than ram_max
 * is never kept here.
 *
 * Transient images are the steps a prompt end superseded (prefix_cache.c):
 * the previous request of a tool loop, kept so that a client that retries
 * or edits the last tool step still finds the loop so far.  The next prompt
 * end of the chain drops them; they never go to disk (a long loop would
 * write every step). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/pcache_tiers.h"
#include "util/bigalloc.h"

typedef struct {
    unsigned char *p;
    uint64_t off, cap;
} mem;

static lilac_status mem_write(void *ctx, const void *p, size_t n, lilac_error *e) {
    mem *m = ctx;
    if (n > m->cap - m->off)
        return lilac_fail(e, LILAC_EBACKEND, "snapshot image: more than its %llu bytes", (unsigned long long)m->cap);
    memcpy(m->p + m->off, p, n);
    m->off += n;
    return LILAC_OK;
}

static lilac_status mem_read(void *ctx, void *p, size_t n, lilac_error *e) {
    mem *m = ctx;
    if (n > m->cap - m->off) return lilac_fail(e, LILAC_EFORMAT, "end of the image");
    memcpy(p, m->p + m->off, n);
    m->off += n;
    return LILAC_OK;
}

int srv_pcache_ram_count(const srv_pcache *c, uint64_t *bytes) {
    if (bytes) *bytes = c ? c->ram_bytes : 0;
    return c ? c->nr : 0;
}

int pc_ram_find(const srv_pcache *c, const int32_t *t, int n) {
    for (int i = 0; i < c->nr; i++)
        if (pc_same(c->ram[i].tokens, c->ram[i].n, t, n)) return i;
    return -1;
}

void pc_ram_drop(srv_pcache *c, int i) {
    c->ram_bytes -= c->ram[i].bytes;
    lilac_big_free(c->ram[i].img, (size_t)c->ram[i].bytes);
    c->ram[i] = c->ram[--c->nr];
}

void pc_ram_save(srv_pcache *c, int i) {
    pc_ram *r = &c->ram[i];
    if (c->dir && !r->on_disk && !r->transient && pc_disk_save_image(c, r) == 0) r->on_disk = 1;
}

/* The least recently used images leave until the tier fits ram_max. */
static void trim_ram(srv_pcache *c) {
    while (c->nr > 0 && c->ram_bytes > c->ram_max) {
        int v = 0;
        for (int i = 1; i < c->nr; i++)
            if (c->ram[i].used < c->ram[v].used) v = i;
        c->evictions[SRV_TIER_RAM]++;
        pc_ram_save(c, v);
        pc_ram_drop(c, v);
    }
}

int pc_ram_put(srv_pcache *c, const pc_slot *sl, int transient) {
    const int n = lilac_session_len(sl->s);
    const uint64_t bytes = lilac_snapshot_bytes(c->g, n);
    if (!c->ram_max || bytes > c->ram_max || bytes > SIZE_MAX) return -1;
    int have = pc_ram_find(c, lilac_session_tokens(sl->s), n);
    if (have >= 0) { /* not expected (the tiers are exclusive), but then it is here already */
        if (c->ram[have].used < sl->used) c->ram[have].used = sl->used;
        c->ram[have].transient &= transient;
        return 0;
    }
    if (c->nr == c->capr) {
        int cap = c->capr ? 2 * c->capr : 16;
        pc_ram *nr = realloc(c->ram, (size_t)cap * sizeof *nr);
        if (!nr) return -1;
        c->ram = nr, c->capr = cap;
    }
    const double t0 = pc_now_ms(); /* the time to keep it: its memory (pages supplied at once), then the copy */
    mem m = {lilac_big_alloc((size_t)bytes), 0, bytes};
    if (!m.p) return -1;
    lilac_error e = {0};
    lilac_status st = lilac_session_save(sl->s, sl->anchor ? SNAP_FLAG_ANCHOR : 0, mem_write, &m, &e);
    c->ram_save_ms += pc_now_ms() - t0;
    if (st || m.off != bytes) {
        fprintf(stderr, "%s: warning: prefix cache: not kept in RAM: %s\n", c->who, st ? e.msg : "short image");
        lilac_big_free(m.p, (size_t)bytes);
        return -1;
    }
    c->ram_saves++;
    pc_ram *r = &c->ram[c->nr++];
    /* the tokens follow the header (LILAC_SNAP_HEADER, a multiple of 4) */
    *r = (pc_ram){.img = m.p, .tokens = (const int32_t *)(const void *)(m.p + LILAC_SNAP_HEADER), .n = n,
                  .anchor = sl->anchor, .on_disk = sl->on_disk, .transient = transient, .bytes = bytes, .used = sl->used};
    c->ram_bytes += bytes;
    trim_ram(c);
    return 0;
}

lilac_status pc_ram_take(srv_pcache *c, int i, lilac_session *s, uint32_t *flags, lilac_error *e) {
    mem m = {c->ram[i].img, 0, c->ram[i].bytes};
    const double t0 = pc_now_ms();
    lilac_status st = lilac_session_load(s, mem_read, &m, "RAM snapshot", flags, e);
    c->ram_load_ms += pc_now_ms() - t0;
    if (st) fprintf(stderr, "%s: warning: prefix cache: dropped a snapshot from RAM: %s\n", c->who, e->msg);
    else c->ram_loads++;
    pc_ram_drop(c, i);
    return st;
}

void pc_ram_free(srv_pcache *c) {
    for (int i = 0; i < c->nr; i++) lilac_big_free(c->ram[i].img, (size_t)c->ram[i].bytes);
    free(c->ram);
}
