/* pcache_disk.c — the prefix cache's disk tier (--cache-dir): snapshot
 * files named DIR/<XXH64 of their tokens>.lsnap, an index of their tokens,
 * and the --cache-disk bound.
 *
 * At open the directory's headers are read (tokens only; the checksum is
 * checked when a file is loaded) into the index; files that fail get one
 * warning line each and are left alone (they may be another server's).  A
 * file that fails when loaded (checksum, truncation) gets one warning line
 * and is deleted: its header named this model, so it is ours, and useless.
 * The directory stays under disk_max by deleting the least recently used
 * files (the shared clock, seeded from the files' modification times).
 * When files are written is prefix_cache.c's and pcache_ram.c's business. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/pcache_tiers.h"
#include "util/hash.h"

static void entry_name(const int32_t *t, int n, char *out) {
    snprintf(out, 24, "%016llx.lsnap", (unsigned long long)lilac_hash64(t, (size_t)n * sizeof *t, 0));
}

static void path_of(const srv_pcache *c, const char *name, char *out, size_t cap) {
    snprintf(out, cap, "%s/%s", c->dir, name);
}

int pc_disk_find(const srv_pcache *c, const int32_t *t, int n) {
    for (int i = 0; i < c->nd; i++)
        if (pc_same(c->disk[i].tokens, c->disk[i].n, t, n)) return i;
    return -1;
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

/* Deletes least recently used files until the directory fits disk_max. */
static void trim_disk(srv_pcache *c) {
    while (c->nd > 0 && c->disk_bytes > c->disk_max) {
        int v = 0;
        for (int i = 1; i < c->nd; i++)
            if (c->disk[i].used < c->disk[v].used) v = i;
        pc_forget_file(c, c->disk[v].tokens, c->disk[v].n);
        c->evictions[SRV_TIER_DISK]++;
        drop_entry(c, v, 1);
    }
}

static int add_entry(srv_pcache *c, int32_t *tokens, int n, int anchor, uint64_t bytes, unsigned long long used,
                     const char *name) {
    if (c->nd == c->capd) {
        int cap = c->capd ? 2 * c->capd : 64;
        pc_file *nd = realloc(c->disk, (size_t)cap * sizeof *nd);
        if (!nd) return -1;
        c->disk = nd, c->capd = cap;
    }
    pc_file *d = &c->disk[c->nd++];
    d->tokens = tokens, d->n = n, d->anchor = anchor, d->bytes = bytes, d->used = used;
    snprintf(d->name, sizeof d->name, "%s", name);
    c->disk_bytes += bytes;
    return 0;
}

typedef struct {
    const lilac_session *s; /* a session, */
    const pc_ram *r;        /* or an image */
} source;

/* Writes one snapshot and indexes it; 0 when the directory holds it. */
static int save(srv_pcache *c, const source *src, const int32_t *t, int n, int anchor, uint64_t bytes,
                unsigned long long used) {
    if (!c->dir || bytes > c->disk_max) return -1; /* could never stay */
    int32_t *copy = malloc((size_t)n * sizeof *copy);
    if (!copy) return -1;
    memcpy(copy, t, (size_t)n * sizeof *copy);
    char name[24], path[4200];
    entry_name(t, n, name);
    path_of(c, name, path, sizeof path);
    lilac_error e = {0};
    const double t0 = pc_now_ms();
    lilac_status st = src->s ? lilac_session_save_file(src->s, path, anchor ? SNAP_FLAG_ANCHOR : 0, &e)
                             : lilac_snapshot_write_file(src->r->img, (size_t)src->r->bytes, path, &e);
    c->save_ms += pc_now_ms() - t0;
    if (st) {
        fprintf(stderr, "%s: warning: prefix cache: not saved: %s\n", c->who, e.msg);
        free(copy);
        return -1;
    }
    c->saves++;
    int old = pc_disk_find(c, t, n);
    if (old >= 0) drop_entry(c, old, 0);
    for (int i = 0; i < c->nd; i++) /* a hash collision: the other file was just replaced */
        if (strcmp(c->disk[i].name, name) == 0) {
            pc_forget_file(c, c->disk[i].tokens, c->disk[i].n);
            drop_entry(c, i, 0);
        }
    if (add_entry(c, copy, n, anchor, bytes, used, name)) {
        free(copy);
        unlink(path); /* not indexed: it would never be trimmed */
        return -1;
    }
    trim_disk(c);
    return pc_disk_find(c, t, n) >= 0 ? 0 : -1;
}

int pc_disk_save_session(srv_pcache *c, const lilac_session *s, int anchor, unsigned long long used) {
    const int n = lilac_session_len(s);
    const source src = {.s = s};
    return save(c, &src, lilac_session_tokens(s), n, anchor, lilac_snapshot_bytes(c->g, n), used);
}

int pc_disk_save_image(srv_pcache *c, const pc_ram *r) {
    const source src = {.r = r};
    return save(c, &src, r->tokens, r->n, r->anchor, r->bytes, r->used);
}

lilac_status pc_disk_load(srv_pcache *c, int i, lilac_session *s, uint32_t *flags) {
    char path[4200];
    path_of(c, c->disk[i].name, path, sizeof path);
    lilac_error e = {0};
    const double t0 = pc_now_ms();
    lilac_status st = lilac_session_load_file(s, path, flags, &e);
    c->load_ms += pc_now_ms() - t0;
    if (st) {
        fprintf(stderr, "%s: warning: prefix cache: ignoring %s%s\n", c->who, e.msg, st == LILAC_EFORMAT ? " (deleted)" : "");
        pc_forget_file(c, c->disk[i].tokens, c->disk[i].n);
        drop_entry(c, i, st == LILAC_EFORMAT);
        return st;
    }
    c->loads++;
    c->disk[i].used = ++c->clock;
    return LILAC_OK;
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
    if (c->dir) return lilac_fail(e, LILAC_EINVAL, "prefix cache: a directory is open already");
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
            fprintf(stderr, "%s: warning: prefix cache: ignoring %s\n", c->who, pe.msg);
            continue;
        }
        if (info.n_tokens > c->ctx) {
            fprintf(stderr, "%s: warning: prefix cache: ignoring %s: %d tokens, more than --ctx %d\n", c->who, path,
                    info.n_tokens, c->ctx);
            free(t);
            continue;
        }
        char want[24];
        entry_name(t, info.n_tokens, want);
        if (strcmp(want, files[i].name) != 0 || pc_disk_find(c, t, info.n_tokens) >= 0) { /* renamed or a copy */
            fprintf(stderr, "%s: warning: prefix cache: ignoring %s: its tokens belong in %s\n", c->who, path, want);
            free(t);
            continue;
        }
        if (add_entry(c, t, info.n_tokens, (info.flags & SNAP_FLAG_ANCHOR) != 0, info.file_bytes, ++c->clock,
                      files[i].name))
            free(t);
    }
    free(files);
    trim_disk(c);
    return LILAC_OK;
}

int srv_pcache_disk_count(const srv_pcache *c, uint64_t *bytes) {
    if (bytes) *bytes = c ? c->disk_bytes : 0;
    return c ? c->nd : 0;
}

void pc_disk_free(srv_pcache *c) {
    for (int i = 0; i < c->nd; i++) free(c->disk[i].tokens);
    free(c->disk);
    free(c->dir);
}
