/* snapshot.c — snapshot files: a session's tokens, logits and backend state
 * written to a stream or a file and read back (the layout is in lilac.h),
 * and the model identity they carry.
 *
 * Reading is one pass: the header is checked against the engine before any
 * byte reaches the session, then tokens, logits and the state stream into
 * it while the checksum accumulates; a checksum that fails at the end (or
 * any earlier failure) resets the session, so a bad snapshot never counts as
 * loaded.  Files are written to PATH.tmp.<pid>, synced and renamed.  Not
 * here: which snapshots to keep (src/server/prefix_cache.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine_internal.h"
#include "util/err.h"
#include "util/hash.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "snapshot files are little-endian; this host is not"
#endif

static const char MAGIC[8] = {'L', 'I', 'L', 'A', 'C', 'S', 'N', 'P'};

typedef struct {
    char magic[8];
    uint32_t version, header_bytes;
    uint64_t model_id;
    char format[16];
    uint32_t n_tokens, n_logits, has_logits, flags;
    uint64_t payload_bytes, file_bytes;
    unsigned char reserved[24];
} snap_header;
_Static_assert(sizeof(snap_header) == LILAC_SNAP_HEADER, "snapshot header layout");

/* ------------------------------------------------------------ model identity */

static void hash_int(lilac_hash *h, int64_t v) { lilac_hash_update(h, &v, sizeof v); }
static void hash_f64(lilac_hash *h, double v) { lilac_hash_update(h, &v, sizeof v); }

uint64_t lilac_model_identity(const lilac_model *m) {
    const lilac_config *c = &m->cfg;
    lilac_hash h;
    lilac_hash_init(&h, 0x6c696c6163ULL);
    const int ints[] = {c->vocab_size, c->hidden, c->n_layers, c->n_attn_layers, c->n_lin_layers, c->max_pos,
                        c->tie_embeddings, c->n_heads, c->n_kv_heads, c->head_dim, c->rotary_dim, c->lin_k_heads,
                        c->lin_v_heads, c->lin_k_dim, c->lin_v_dim, c->conv_kernel, c->n_experts, c->n_experts_per_tok,
                        c->moe_inter, c->shared_inter, c->quantized, c->q_bits, c->q_group_size, (int)m->layout,
                        m->synthetic};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) hash_int(&h, ints[i]);
    lilac_hash_update(&h, c->is_attn, (size_t)(c->n_layers > 0 && c->n_layers <= LILAC_MAX_LAYERS ? c->n_layers : 0));
    hash_f64(&h, c->rms_eps);
    hash_f64(&h, c->rope_theta);
    hash_int(&h, (int64_t)m->weight_bytes);
    for (int i = 0; i < m->tensors.n; i++) {
        const lilac_tensor *t = &m->tensors.t[i];
        lilac_hash_update(&h, t->name, strlen(t->name) + 1);
        hash_int(&h, t->dtype);
        hash_int(&h, t->ndim);
        for (int d = 0; d < t->ndim && d < LILAC_ST_MAX_DIMS; d++) hash_int(&h, t->shape[d]);
        hash_int(&h, (int64_t)t->nbytes);
    }
    for (int f = 0; f < m->tensors.nfiles; f++) hash_int(&h, (int64_t)m->tensors.maps[f].size);
    return lilac_hash_final(&h);
}

uint64_t lilac_engine_model_id(const lilac_engine *g) { return g->model_id; }

uint64_t lilac_snapshot_bytes(const lilac_engine *g, int n) {
    return LILAC_SNAP_HEADER + 4 * (uint64_t)n + 4 * (uint64_t)g->model.cfg.vocab_size +
           g->ops->state_payload_bytes(g->be, n) + 8;
}

/* ------------------------------------------------------------ hashing streams */

typedef struct {
    lilac_write_fn w;
    lilac_read_fn r;
    void *ctx;
    lilac_hash h;
    uint64_t off; /* bytes moved so far */
    const char *where;
} hstream;

/* Bytes are hashed and moved in blocks small enough to stay in the cache:
 * the second pass over a block (the sink's copy after the hash, or the
 * hash after the source's copy) reads it from L2, not from memory. */
#define HS_BLOCK ((size_t)256 << 10)

static lilac_status hs_write(void *ctx, const void *p, size_t n, lilac_error *e) {
    hstream *s = ctx;
    const unsigned char *q = p;
    size_t done = 0;
    do {
        const size_t k = n - done < HS_BLOCK ? n - done : HS_BLOCK;
        lilac_hash_update(&s->h, q + done, k);
        lilac_status st = s->w(s->ctx, q + done, k, e);
        if (st) return st;
        s->off += k, done += k;
    } while (done < n);
    return LILAC_OK;
}

static lilac_status hs_read(void *ctx, void *p, size_t n, lilac_error *e) {
    hstream *s = ctx;
    unsigned char *q = p;
    size_t done = 0;
    do {
        const size_t k = n - done < HS_BLOCK ? n - done : HS_BLOCK;
        if (s->r(s->ctx, q + done, k, e)) {
            char why[sizeof ((lilac_error *)0)->msg];
            snprintf(why, sizeof why, "%s", e ? e->msg : "");
            return lilac_fail(e, LILAC_EFORMAT, "%s: snapshot truncated or unreadable at byte %llu (%s)", s->where,
                              (unsigned long long)s->off, why);
        }
        lilac_hash_update(&s->h, q + done, k);
        s->off += k, done += k;
    } while (done < n);
    return LILAC_OK;
}

/* ------------------------------------------------------------ header */

static void make_header(const lilac_session *s, uint32_t flags, snap_header *h) {
    const lilac_engine *g = s->g;
    memset(h, 0, sizeof *h);
    memcpy(h->magic, MAGIC, 8);
    h->version = LILAC_SNAP_VERSION;
    h->header_bytes = LILAC_SNAP_HEADER;
    h->model_id = g->model_id;
    snprintf(h->format, sizeof h->format, "%s", g->ops->state_format);
    h->n_tokens = (uint32_t)lilac_session_len(s);
    h->n_logits = (uint32_t)g->model.cfg.vocab_size;
    h->has_logits = s->have_logits != 0;
    h->flags = flags;
    h->payload_bytes = g->ops->state_payload_bytes(g->be, lilac_session_len(s));
    h->file_bytes = lilac_snapshot_bytes(g, lilac_session_len(s));
}

/* Everything the header says, checked against g and a session of cap tokens. */
static lilac_status check_header(const lilac_engine *g, const snap_header *h, int cap, const char *where, lilac_error *e) {
    if (memcmp(h->magic, MAGIC, 8) != 0) return lilac_fail(e, LILAC_EFORMAT, "%s: not a lilac snapshot (bad magic)", where);
    if (h->version != LILAC_SNAP_VERSION)
        return lilac_fail(e, LILAC_EFORMAT, "%s: snapshot format version %u (this lilac reads version %d)", where,
                          h->version, LILAC_SNAP_VERSION);
    if (h->header_bytes != LILAC_SNAP_HEADER)
        return lilac_fail(e, LILAC_EFORMAT, "%s: header of %u bytes (expected %d)", where, h->header_bytes, LILAC_SNAP_HEADER);
    for (size_t i = 0; i < sizeof h->reserved; i++)
        if (h->reserved[i]) return lilac_fail(e, LILAC_EFORMAT, "%s: byte %zu: reserved header byte is not zero", where, 72 + i);
    if (h->model_id != g->model_id)
        return lilac_fail(e, LILAC_EFORMAT, "%s: snapshot of another model (identity %016llx; this model is %016llx)", where,
                          (unsigned long long)h->model_id, (unsigned long long)g->model_id);
    if (memchr(h->format, 0, sizeof h->format) == NULL || strcmp(h->format, g->ops->state_format) != 0)
        return lilac_fail(e, LILAC_EFORMAT, "%s: state layout '%.16s' (this backend writes '%s')", where,
                          memchr(h->format, 0, sizeof h->format) ? h->format : "?", g->ops->state_format);
    if (h->n_tokens < 1 || h->n_tokens > (uint32_t)cap)
        return lilac_fail(e, LILAC_EFORMAT, "%s: %u tokens (a session here holds 1 to %d)", where, h->n_tokens, cap);
    if (h->n_logits != (uint32_t)g->model.cfg.vocab_size || h->has_logits > 1)
        return lilac_fail(e, LILAC_EFORMAT, "%s: %u logits, flag %u (the vocabulary has %d)", where, h->n_logits,
                          h->has_logits, g->model.cfg.vocab_size);
    const uint64_t payload = g->ops->state_payload_bytes(g->be, (int)h->n_tokens);
    if (h->payload_bytes != payload)
        return lilac_fail(e, LILAC_EFORMAT, "%s: state payload of %llu bytes (%u tokens take %llu)", where,
                          (unsigned long long)h->payload_bytes, h->n_tokens, (unsigned long long)payload);
    if (h->file_bytes != lilac_snapshot_bytes(g, (int)h->n_tokens))
        return lilac_fail(e, LILAC_EFORMAT, "%s: header says %llu file bytes (%u tokens take %llu)", where,
                          (unsigned long long)h->file_bytes, h->n_tokens,
                          (unsigned long long)lilac_snapshot_bytes(g, (int)h->n_tokens));
    return LILAC_OK;
}

/* ------------------------------------------------------------ streams */

lilac_status lilac_session_save(const lilac_session *s, uint32_t flags, lilac_write_fn w, void *ctx, lilac_error *e) {
    if (!s || !w) return lilac_fail(e, LILAC_EINVAL, "snapshot save needs a session and a sink");
    const lilac_engine *g = s->g;
    const int n = lilac_session_len(s);
    if (n < 1) return lilac_fail(e, LILAC_EINVAL, "snapshot save: the session is empty");
    if (!g->ops->state_save) return lilac_fail(e, LILAC_EUNSUPPORTED, "the %s backend cannot save states", g->ops->name);
    snap_header h;
    make_header(s, flags, &h);
    hstream hs = {.w = w, .ctx = ctx};
    lilac_hash_init(&hs.h, 0);
    lilac_status st;
    if ((st = hs_write(&hs, &h, sizeof h, e)) || (st = hs_write(&hs, s->tokens, (size_t)n * sizeof(int32_t), e)) ||
        (st = hs_write(&hs, s->logits, (size_t)g->model.cfg.vocab_size * sizeof(float), e)) ||
        (st = g->ops->state_save(g->be, s->st, hs_write, &hs, e)))
        return st;
    if (hs.off != h.file_bytes - 8)
        return lilac_fail(e, LILAC_EBACKEND, "snapshot save: wrote %llu bytes, the header says %llu",
                          (unsigned long long)hs.off, (unsigned long long)(h.file_bytes - 8));
    uint64_t sum = lilac_hash_final(&hs.h);
    return w(ctx, &sum, sizeof sum, e);
}

lilac_status lilac_session_load(lilac_session *s, lilac_read_fn r, void *ctx, const char *where, uint32_t *flags,
                                lilac_error *e) {
    if (!s || !r) return lilac_fail(e, LILAC_EINVAL, "snapshot load needs a session and a source");
    if (!where) where = "snapshot";
    lilac_engine *g = s->g;
    if (!g->ops->state_load) return lilac_fail(e, LILAC_EUNSUPPORTED, "the %s backend cannot load states", g->ops->name);
    lilac_session_reset(s);
    hstream hs = {.r = r, .ctx = ctx, .where = where};
    lilac_hash_init(&hs.h, 0);
    snap_header h;
    lilac_status st;
    if ((st = hs_read(&hs, &h, sizeof h, e)) || (st = check_header(g, &h, s->cap, where, e))) return st;
    const int n = (int)h.n_tokens, V = g->model.cfg.vocab_size;
    if ((st = hs_read(&hs, s->tokens, (size_t)n * sizeof(int32_t), e))) return st;
    for (int i = 0; i < n; i++)
        if (s->tokens[i] < 0 || s->tokens[i] >= V)
            return lilac_fail(e, LILAC_EFORMAT, "%s: token %d is %d, outside the vocabulary [0, %d)", where, i, s->tokens[i], V);
    if ((st = hs_read(&hs, s->logits, (size_t)V * sizeof(float), e))) return st;
    if ((st = g->ops->state_load(g->be, s->st, n, hs_read, &hs, e))) {
        lilac_session_reset(s);
        return st;
    }
    uint64_t want = lilac_hash_final(&hs.h), sum = 0;
    if (r(ctx, &sum, sizeof sum, e)) st = lilac_fail(e, LILAC_EFORMAT, "%s: snapshot truncated before its checksum", where);
    else if (sum != want)
        st = lilac_fail(e, LILAC_EFORMAT, "%s: checksum mismatch (file %016llx, contents %016llx): corrupt snapshot", where,
                        (unsigned long long)sum, (unsigned long long)want);
    if (st) {
        lilac_session_reset(s);
        return st;
    }
    s->have_logits = (int)h.has_logits;
    if (flags) *flags = h.flags;
    return LILAC_OK;
}

/* ------------------------------------------------------------ files */

typedef struct {
    FILE *f;
    const char *path;
    uint64_t off, kicked; /* writing: bytes written, bytes whose writeback was started */
} fstream;

/* Every WB_STEP bytes written the kernel is asked to start writing them to
 * the device (sync_file_range, Linux; elsewhere nothing), so the disk works
 * while the rest of the snapshot is produced and the fsync at the end finds
 * little left to do: a 550 MB file took 360-830 ms to write and fsync here,
 * 235 ms with the early writeback.  The fsync still makes the whole file
 * durable before the rename. */
#define WB_STEP ((size_t)8 << 20)

static void start_writeback(fstream *s) {
#ifdef SYNC_FILE_RANGE_WRITE
    if (fflush(s->f) == 0) /* a failure shows again at the closing fflush */
        (void)sync_file_range(fileno(s->f), (off_t)s->kicked, (off_t)(s->off - s->kicked), SYNC_FILE_RANGE_WRITE);
#endif
    s->kicked = s->off;
}

static lilac_status f_write(void *ctx, const void *p, size_t n, lilac_error *e) {
    fstream *s = ctx;
    const unsigned char *q = p;
    while (n) {
        const size_t k = n < WB_STEP ? n : WB_STEP;
        if (fwrite(q, 1, k, s->f) != k) return lilac_fail(e, LILAC_EIO, "%s: write failed: %s", s->path, strerror(errno));
        q += k, n -= k, s->off += k;
        if (s->off - s->kicked >= WB_STEP) start_writeback(s);
    }
    return LILAC_OK;
}

static lilac_status f_read(void *ctx, void *p, size_t n, lilac_error *e) {
    fstream *s = ctx;
    if (n && fread(p, 1, n, s->f) != n)
        return lilac_fail(e, LILAC_EFORMAT, "%s: %s", s->path, ferror(s->f) ? strerror(errno) : "unexpected end of file");
    return LILAC_OK;
}

/* Writes PATH.tmp.<pid> through put(ctx, f), syncs it and renames it over
 * PATH, so PATH is never half written. */
static lilac_status write_atomic(const char *path, lilac_status (*put)(void *ctx, fstream *fs, lilac_error *e), void *ctx,
                                 lilac_error *e) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return lilac_fail(e, LILAC_EINVAL, "%s: path too long", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return lilac_fail(e, LILAC_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    fstream fs = {f, tmp, 0, 0};
    lilac_status st = put(ctx, &fs, e);
    if (!st && (fflush(f) != 0 || fsync(fileno(f)) != 0)) st = lilac_fail(e, LILAC_EIO, "%s: %s", tmp, strerror(errno));
    if (fclose(f) != 0 && !st) st = lilac_fail(e, LILAC_EIO, "%s: close: %s", tmp, strerror(errno));
    if (!st && rename(tmp, path) != 0) st = lilac_fail(e, LILAC_EIO, "%s: rename to %s: %s", tmp, path, strerror(errno));
    if (st) unlink(tmp);
    return st;
}

typedef struct {
    const lilac_session *s;
    uint32_t flags;
} save_args;

static lilac_status put_session(void *ctx, fstream *fs, lilac_error *e) {
    const save_args *a = ctx;
    return lilac_session_save(a->s, a->flags, f_write, fs, e);
}

lilac_status lilac_session_save_file(const lilac_session *s, const char *path, uint32_t flags, lilac_error *e) {
    save_args a = {s, flags};
    return write_atomic(path, put_session, &a, e);
}

typedef struct {
    const void *p;
    size_t n;
} bytes_args;

static lilac_status put_bytes(void *ctx, fstream *fs, lilac_error *e) {
    const bytes_args *a = ctx;
    return f_write(fs, a->p, a->n, e);
}

lilac_status lilac_snapshot_write_file(const void *img, size_t n, const char *path, lilac_error *e) {
    if (!img || n < LILAC_SNAP_HEADER + 8 || memcmp(img, MAGIC, sizeof MAGIC) != 0)
        return lilac_fail(e, LILAC_EINVAL, "%s: not a snapshot image (%zu bytes)", path ? path : "?", n);
    if (!path) return lilac_fail(e, LILAC_EINVAL, "snapshot write needs a path");
    bytes_args a = {img, n};
    return write_atomic(path, put_bytes, &a, e);
}

/* Opens path and checks that its size is what its header says. */
static lilac_status open_checked(const lilac_engine *g, const char *path, int cap, FILE **out, snap_header *h,
                                 lilac_error *e) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return lilac_fail(e, LILAC_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    lilac_status st = LILAC_OK;
    if (fstat(fileno(f), &sb) != 0) st = lilac_fail(e, LILAC_EIO, "%s: %s", path, strerror(errno));
    else if ((uint64_t)sb.st_size < sizeof *h)
        st = lilac_fail(e, LILAC_EFORMAT, "%s: %lld bytes, shorter than a snapshot header", path, (long long)sb.st_size);
    else if (fread(h, sizeof *h, 1, f) != 1) st = lilac_fail(e, LILAC_EIO, "%s: cannot read the header", path);
    else if (!(st = check_header(g, h, cap, path, e)) && (uint64_t)sb.st_size != h->file_bytes)
        st = lilac_fail(e, LILAC_EFORMAT, "%s: %lld bytes, the header says %llu (truncated or extended)", path,
                        (long long)sb.st_size, (unsigned long long)h->file_bytes);
    if (st) {
        fclose(f);
        return st;
    }
    *out = f;
    return LILAC_OK;
}

lilac_status lilac_session_load_file(lilac_session *s, const char *path, uint32_t *flags, lilac_error *e) {
    if (!s || !path) return lilac_fail(e, LILAC_EINVAL, "snapshot load needs a session and a path");
    FILE *f;
    snap_header h;
    lilac_status st = open_checked(s->g, path, s->cap, &f, &h, e);
    if (st) {
        lilac_session_reset(s);
        return st;
    }
    rewind(f);
#ifdef POSIX_FADV_SEQUENTIAL
    (void)posix_fadvise(fileno(f), 0, 0, POSIX_FADV_SEQUENTIAL); /* a hint: larger read-ahead */
#endif
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    fstream fs = {f, path, 0, 0};
    st = lilac_session_load(s, f_read, &fs, path, flags, e);
    fclose(f);
    return st;
}

lilac_status lilac_snapshot_peek_file(const lilac_engine *g, const char *path, lilac_snap_info *info, int32_t **tokens,
                                      lilac_error *e) {
    *tokens = NULL;
    FILE *f;
    snap_header h;
    lilac_status st = open_checked(g, path, g->model.cfg.max_pos, &f, &h, e);
    if (st) return st;
    int32_t *t = malloc((size_t)h.n_tokens * sizeof *t);
    if (!t) st = lilac_fail(e, LILAC_ENOMEM, "%s: %u tokens", path, h.n_tokens);
    else if (fread(t, sizeof *t, h.n_tokens, f) != h.n_tokens) st = lilac_fail(e, LILAC_EIO, "%s: cannot read the tokens", path);
    fclose(f);
    if (st) {
        free(t);
        return st;
    }
    info->n_tokens = (int)h.n_tokens;
    info->flags = h.flags;
    info->file_bytes = h.file_bytes;
    *tokens = t;
    return LILAC_OK;
}
