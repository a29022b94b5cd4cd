/* pcache_tiers.h — the prefix cache's insides, shared by its three files:
 * prefix_cache.c (the slots: whole sessions on the backend, and how
 * snapshots move between tiers), pcache_ram.c (--cache-ram: snapshot images
 * in host memory) and pcache_disk.c (--cache-dir: snapshot files).  Only
 * the engine thread touches any of it.  Nothing here is for other files:
 * they use the srv_pcache_* functions of server.h.
 *
 * One clock orders every tier (the LRU of each, and the order in which the
 * shutdown writes what is not on disk yet). */
#ifndef LILAC_SERVER_PCACHE_TIERS_H
#define LILAC_SERVER_PCACHE_TIERS_H

#include <stdint.h>

#include "server/server.h"

#define SNAP_FLAG_ANCHOR 1u

typedef struct {
    lilac_session *s;        /* NULL until first stored */
    unsigned long long used; /* LRU clock; 0 = empty */
    int anchor;
    int on_disk; /* the directory holds this snapshot */
} pc_slot;

/* A snapshot in host memory: the exact bytes of its snapshot file
 * (lilac_session_save), so it goes to disk without passing through a session. */
typedef struct {
    unsigned char *img;    /* [bytes] */
    const int32_t *tokens; /* [n], inside img just after the header */
    int n, anchor, on_disk;
    int transient; /* superseded by a prompt end: kept for one step of its chain, never written */
    uint64_t bytes;
    unsigned long long used;
} pc_ram;

/* A file of the directory, indexed by its tokens (the state is read on load). */
typedef struct {
    int32_t *tokens;
    int n, anchor;
    uint64_t bytes;
    unsigned long long used;
    char name[24]; /* <16 hex>.lsnap */
} pc_file;

struct srv_pcache {
    lilac_engine *g;
    const char *who; /* the log lines' prefix: "lilac serve", "lilac chat" */
    int quiet;       /* no summary lines at the end (warnings still) */
    int ctx, n;
    pc_slot *slots;
    unsigned long long clock;
    long superseded; /* non-anchor snapshots dropped by a prompt end that extends them */
    long hits[SRV_TIER_N], reused[SRV_TIER_N], evictions[SRV_TIER_N];
    /* RAM tier; ram_max 0 = none */
    uint64_t ram_max, ram_bytes;
    pc_ram *ram;
    int nr, capr;
    long ram_saves, ram_loads;
    double ram_save_ms, ram_load_ms;
    /* disk tier; dir NULL = none */
    char *dir;
    uint64_t disk_max, disk_bytes;
    pc_file *disk;
    int nd, capd;
    long saves, loads; /* files written, files loaded into slots */
    double save_ms, load_ms;
};

double pc_now_ms(void);
int pc_same(const int32_t *a, int na, const int32_t *b, int nb);
/* b[0..nb) starts with a[0..na). */
int pc_prefix(const int32_t *a, int na, const int32_t *b, int nb);
/* The file of tokens t[0..n) is gone: no slot or RAM entry is backed by it now. */
void pc_forget_file(srv_pcache *c, const int32_t *t, int n);

/* RAM tier (pcache_ram.c) */
/* Keeps an image of a slot's snapshot (the slot is leaving the backend),
 * with its place in the LRU; the least recently used images go to disk (or
 * are dropped; transient ones always are) to stay under ram_max.  0 when RAM
 * took it. */
int pc_ram_put(srv_pcache *c, const pc_slot *sl, int transient);
int pc_ram_find(const srv_pcache *c, const int32_t *t, int n); /* the entry of exactly t[0..n), or -1 */
/* Loads entry i into s and drops it from RAM (the tiers are exclusive). */
lilac_status pc_ram_take(srv_pcache *c, int i, lilac_session *s, uint32_t *flags, lilac_error *e);
void pc_ram_drop(srv_pcache *c, int i);
/* Writes entry i to the directory (when it is not there yet and not transient). */
void pc_ram_save(srv_pcache *c, int i);
void pc_ram_free(srv_pcache *c);

/* Disk tier (pcache_disk.c) */
int pc_disk_find(const srv_pcache *c, const int32_t *t, int n);
/* Writes a slot's session, or a RAM image, as a file (one warning line on
 * failure); 0 when the directory holds it afterwards.  The file keeps the
 * snapshot's place in the LRU (used), so the bound drops what was used least
 * recently, whichever tier it came from. */
int pc_disk_save_session(srv_pcache *c, const lilac_session *s, int anchor, unsigned long long used);
int pc_disk_save_image(srv_pcache *c, const pc_ram *r);
/* Loads file i into s; a file that fails is dropped from the index (and
 * deleted when it is ours but corrupt), with one warning line. */
lilac_status pc_disk_load(srv_pcache *c, int i, lilac_session *s, uint32_t *flags);
void pc_disk_free(srv_pcache *c);

#endif
