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
 * or fail with LILAC_EINVAL.
 *
 * The disk tier (srv_pcache_open_dir, --cache-dir): a snapshot is written to
 * DIR/<XXH64 of its tokens>.lsnap when it leaves the slots by eviction, and
 * every live slot is written when the cache is freed (server shutdown) —
 * not on every store: most snapshots are superseded within a turn or two,
 * and writing each (up to hundreds of MB at long contexts) would stall the
 * engine thread for nothing.  The cost: a crash (SIGKILL, power) loses what
 * was only in the slots.  At open the directory's headers are read (tokens
 * only; the checksum is checked when a file is loaded) into an index; files
 * that fail get one warning line each and are left alone.  srv_pcache_fetch
 * loads the longest indexed snapshot that prefixes a prompt into a slot; a
 * file that fails then (checksum, truncation) gets one warning line and is
 * deleted (its header named this model: it is ours, and useless).  The
 * directory stays under max_bytes by deleting the least recently used files
 * (the index's clock, seeded from the files' modification times). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/server.h"
#include "util/hash.h"

typedef struct {
    lilac_session *s; /* NULL until first stored */
    unsigned long long used; /* LRU clock; 0 = empty */
    int anchor;
    int on_disk; /* the directory holds this snapshot */
} slot;

typedef struct {
    int32_t *tokens;
    int n, anchor;
    uint64_t bytes;
    unsigned long long used; /* same clock as the slots */
    char name[24];           /* <16 hex>.lsnap */
} disk_entry;

struct srv_pcache {
    lilac_engine *g;
    int ctx, n;
    slot *slots;
    unsigned long long clock;
    long evictions;  /* live snapshots replaced by the LRU to make room */
    long superseded; /* non-anchor snapshots dropped by a prompt end that extends them */
    char *dir;       /* NULL: no disk tier */
    uint64_t disk_max, disk_bytes;
    disk_entry *disk;
    int nd, capd;
    long saves, loads; /* files written, files loaded into slots */
    double save_ms, load_ms; /* their wall time */
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

#define SNAP_FLAG_ANCHOR 1u

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

static void save_slot(srv_pcache *c, slot *sl);

void srv_pcache_free(srv_pcache *c) {
    if (!c) return;
    /* the disk tier keeps what the slots held, least recent first so the
     * files' times keep the order */
    for (unsigned long long after = 0; c->dir;) { /* each slot once (a save may trim another's file) */
        slot *next = NULL;
        for (int i = 0; i < c->n; i++)
            if (c->slots[i].used > after && (!next || c->slots[i].used < next->used)) next = &c->slots[i];
        if (!next) break;
        after = next->used;
        save_slot(c, next);
    }
    if (c->dir)
        fprintf(stderr,
                "lilac serve: prefix cache on disk: %s: %d snapshot%s (%.1f MiB); %ld written (%.1f ms), %ld loaded (%.1f ms)\n",
                c->dir, c->nd, c->nd == 1 ? "" : "s", c->disk_bytes / 1048576.0, c->saves, c->save_ms, c->loads, c->load_ms);
    for (int i = 0; i < c->n; i++) lilac_session_free(c->slots[i].s);
    for (int i = 0; i < c->nd; i++) free(c->disk[i].tokens);
    free(c->disk);
    free(c->dir);
    free(c->slots);
    free(c);
}

/* ------------------------------------------------------------ disk tier */

static void entry_name(const int32_t *t, int n, char *out) {
    snprintf(out, 24, "%016llx.lsnap", (unsigned long long)lilac_hash64(t, (size_t)n * sizeof *t, 0));
}

static int entry_of(const srv_pcache *c, const int32_t *t, int n) {
    for (int i = 0; i < c->nd; i++)
        if (c->disk[i].n == n && memcmp(c->disk[i].tokens, t, (size_t)n * sizeof *t) == 0) return i;
    return -1;
}

static void path_of(const srv_pcache *c, const char *name, char *out, size_t cap) {
    snprintf(out, cap, "%s/%s", c->dir, name);
}

static void drop_entry(srv_pcache *c, int i, int unlink_file) {
    char path[4200];
    if (unlink_file) {
        path_of(c, c->disk[i].name, path, sizeof path);
        unlink(path);
    }
    c->disk_bytes -= c->disk[i].bytes;
    free(c->disk[i].tokens);
    c->disk[i] = c->disk[--c->nd];
}

/* Deletes least recently used files until the directory fits max_bytes. */
static void trim_disk(srv_pcache *c) {
    while (c->nd > 0 && c->disk_bytes > c->disk_max) {
        int v = 0;
        for (int i = 1; i < c->nd; i++)
            if (c->disk[i].used < c->disk[v].used) v = i;
        /* a slot that holds it is no longer backed by a file */
        for (int i = 0; i < c->n; i++)
            if (c->slots[i].used && c->slots[i].on_disk && lilac_session_len(c->slots[i].s) == c->disk[v].n &&
                memcmp(lilac_session_tokens(c->slots[i].s), c->disk[v].tokens, (size_t)c->disk[v].n * 4) == 0)
                c->slots[i].on_disk = 0;
        drop_entry(c, v, 1);
    }
}

static int add_entry(srv_pcache *c, int32_t *tokens, int n, int anchor, uint64_t bytes, const char *name) {
    if (c->nd == c->capd) {
        int cap = c->capd ? 2 * c->capd : 64;
        disk_entry *nd = realloc(c->disk, (size_t)cap * sizeof *nd);
        if (!nd) return -1;
        c->disk = nd, c->capd = cap;
    }
    disk_entry *d = &c->disk[c->nd++];
    d->tokens = tokens, d->n = n, d->anchor = anchor, d->bytes = bytes, d->used = ++c->clock;
    snprintf(d->name, sizeof d->name, "%s", name);
    c->disk_bytes += bytes;
    return 0;
}

/* Writes a slot's snapshot to the directory (one warning line on failure). */
static void save_slot(srv_pcache *c, slot *sl) {
    if (!c->dir || !sl->used || sl->on_disk) return;
    const int n = lilac_session_len(sl->s);
    const int32_t *t = lilac_session_tokens(sl->s);
    const uint64_t bytes = lilac_snapshot_bytes(c->g, n);
    if (bytes > c->disk_max) return; /* could never stay */
    int32_t *copy = malloc((size_t)n * sizeof *copy);
    if (!copy) return;
    memcpy(copy, t, (size_t)n * sizeof *copy);
    char name[24], path[4200];
    entry_name(t, n, name);
    path_of(c, name, path, sizeof path);
    lilac_error e = {0};
    const double t0 = now_ms();
    lilac_status st = lilac_session_save_file(sl->s, path, sl->anchor ? SNAP_FLAG_ANCHOR : 0, &e);
    c->save_ms += now_ms() - t0;
    if (st) {
        fprintf(stderr, "lilac serve: warning: prefix cache: not saved: %s\n", e.msg);
        free(copy);
        return;
    }
    c->saves++;
    int old = entry_of(c, t, n);
    if (old >= 0) drop_entry(c, old, 0);
    for (int i = 0; i < c->nd; i++) /* a hash collision: the other file was just replaced */
        if (strcmp(c->disk[i].name, name) == 0) drop_entry(c, i, 0);
    if (add_entry(c, copy, n, sl->anchor, bytes, name)) free(copy);
    sl->on_disk = 1;
    trim_disk(c);
}

typedef struct {
    char name[256];
    long long mtime_ns;
} scan_file;

static int by_mtime(const void *a, const void *b) {
    const scan_file *x = a, *y = b;
    return (x->mtime_ns > y->mtime_ns) - (x->mtime_ns < y->mtime_ns);
}

lilac_status srv_pcache_open_dir(srv_pcache *c, const char *dir, uint64_t max_bytes, lilac_error *e) {
    if (!c || !dir || !*dir) return lilac_fail(e, LILAC_EINVAL, "prefix cache: open_dir needs a cache and a directory");
    if (strlen(dir) > 4000) return lilac_fail(e, LILAC_EINVAL, "--cache-dir: path too long");
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) return lilac_fail(e, LILAC_EIO, "--cache-dir %s: %s", dir, strerror(errno));
    DIR *d = opendir(dir);
    if (!d) return lilac_fail(e, LILAC_EIO, "--cache-dir %s: %s", dir, strerror(errno));
    if (!(c->dir = strdup(dir))) {
        closedir(d);
        return lilac_fail(e, LILAC_ENOMEM, "prefix cache directory");
    }
    c->disk_max = max_bytes;
    scan_file *files = NULL;
    int nf = 0, capf = 0;
    struct dirent *de;
    char path[4400];
    while ((de = readdir(d))) {
        const size_t len = strlen(de->d_name);
        if (len < 7 || len >= sizeof files->name) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (strstr(de->d_name, ".lsnap.tmp.")) { /* a write a crash interrupted */
            unlink(path);
            continue;
        }
        if (strcmp(de->d_name + len - 6, ".lsnap") != 0) continue;
        struct stat sb;
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (nf == capf) {
            capf = capf ? 2 * capf : 64;
            scan_file *nfs = realloc(files, (size_t)capf * sizeof *nfs);
            if (!nfs) break;
            files = nfs;
        }
        snprintf(files[nf].name, sizeof files[nf].name, "%s", de->d_name);
        files[nf++].mtime_ns = (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
    }
    closedir(d);
    if (nf) qsort(files, (size_t)nf, sizeof *files, by_mtime);
    for (int i = 0; i < nf; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        lilac_snap_info info;
        int32_t *t = NULL;
        lilac_error pe = {0};
        if (lilac_snapshot_peek_file(c->g, path, &info, &t, &pe)) {
            fprintf(stderr, "lilac serve: warning: prefix cache: ignoring %s\n", pe.msg);
            continue;
        }
        if (info.n_tokens > c->ctx) {
            fprintf(stderr, "lilac serve: warning: prefix cache: ignoring %s: %d tokens, more than --ctx %d\n", path,
                    info.n_tokens, c->ctx);
            free(t);
            continue;
        }
        char want[24];
        entry_name(t, info.n_tokens, want);
        if (strcmp(want, files[i].name) != 0 || entry_of(c, t, info.n_tokens) >= 0) { /* renamed or a copy */
            fprintf(stderr, "lilac serve: warning: prefix cache: ignoring %s: its tokens belong in %s\n", path, want);
            free(t);
            continue;
        }
        if (add_entry(c, t, info.n_tokens, (info.flags & SNAP_FLAG_ANCHOR) != 0, info.file_bytes, files[i].name)) free(t);
    }
    free(files);
    trim_disk(c);
    return LILAC_OK;
}

int srv_pcache_disk_count(const srv_pcache *c, uint64_t *bytes) {
    if (bytes) *bytes = c ? c->disk_bytes : 0;
    return c ? c->nd : 0;
}

/* The slot the next store fills (the least recently used or an empty one),
 * its snapshot written to disk first when it has none there. */
static slot *take_victim(srv_pcache *c) {
    int victim = 0;
    for (int i = 1; i < c->n; i++)
        if (c->slots[i].used < c->slots[victim].used) victim = i;
    slot *v = &c->slots[victim];
    if (v->used) {
        c->evictions++;
        save_slot(c, v);
    }
    v->used = 0;
    return v;
}

int srv_pcache_fetch(srv_pcache *c, const int32_t *ids, int n, int min_len, int *len) {
    if (len) *len = 0;
    if (!c || !ids || !c->dir || c->n <= 0) return -1;
    for (;;) {
        int best = -1;
        for (int i = 0; i < c->nd; i++) {
            const disk_entry *d = &c->disk[i];
            if (d->n > min_len && d->n <= n && (best < 0 || d->n > c->disk[best].n) &&
                memcmp(d->tokens, ids, (size_t)d->n * sizeof *ids) == 0)
                best = i;
        }
        if (best < 0) return -1;
        slot *v = take_victim(c);
        /* take_victim may have trimmed the directory: find the entry again */
        disk_entry *d = &c->disk[best];
        if (best >= c->nd || d->n <= min_len || memcmp(d->tokens, ids, (size_t)d->n * sizeof *ids) != 0) continue;
        lilac_error e = {0};
        if (!v->s && lilac_session_new(c->g, c->ctx, &v->s, &e)) {
            fprintf(stderr, "lilac serve: warning: prefix cache: %s\n", e.msg);
            return -1;
        }
        char path[4200];
        path_of(c, d->name, path, sizeof path);
        uint32_t flags = 0;
        const double t0 = now_ms();
        lilac_status st = lilac_session_load_file(v->s, path, &flags, &e);
        c->load_ms += now_ms() - t0;
        if (st) {
            fprintf(stderr, "lilac serve: warning: prefix cache: ignoring %s%s\n", e.msg,
                    st == LILAC_EFORMAT ? " (deleted)" : "");
            drop_entry(c, best, st == LILAC_EFORMAT);
            continue; /* a shorter one may still do */
        }
        c->loads++;
        d->used = ++c->clock;
        v->used = ++c->clock;
        v->anchor = (flags & SNAP_FLAG_ANCHOR) != 0;
        v->on_disk = 1;
        if (len) *len = d->n;
        return (int)(v - c->slots);
    }
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
    slot *v = take_victim(c);
    if (!v->s) {
        lilac_status st = lilac_session_new(c->g, c->ctx, &v->s, e);
        if (st) return st;
    }
    v->used = 0; /* stays empty if the copy fails */
    lilac_status st = lilac_session_copy(v->s, src, e);
    if (st) return st;
    v->used = ++c->clock;
    v->anchor = anchor;
    v->on_disk = c->dir && entry_of(c, t, n) >= 0;
    return LILAC_OK;
}

void srv_pcache_touch_anchors(srv_pcache *c, const int32_t *ids, int n) {
    for (int i = 0; c && ids && i < c->n; i++) {
        slot *sl = &c->slots[i];
        if (!sl->used || !sl->anchor) continue;
        int m = lilac_session_len(sl->s);
        if (m <= n && memcmp(lilac_session_tokens(sl->s), ids, (size_t)m * sizeof *ids) == 0) sl->used = ++c->clock;
    }
    for (int i = 0; c && ids && i < c->nd; i++) {
        disk_entry *d = &c->disk[i];
        if (d->anchor && d->n <= n && memcmp(d->tokens, ids, (size_t)d->n * sizeof *ids) == 0) d->used = ++c->clock;
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
