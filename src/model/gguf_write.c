/* gguf_write.c — the GGUF writer (see gguf.h): key/values serialised as they
 * are added, tensor infos kept until the file is written, tensor data pulled
 * from each tensor's callback in order so a 20 GB file never sits in memory. */
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "util/buf.h"

typedef struct {
    char *name;
    int type, ndim;
    int64_t ne[LILAC_GGUF_MAX_DIMS];
    size_t nbytes;
    uint64_t offset;
    lilac_gguf_data_fn fn;
    void *ctx;
} wtensor;

struct lilac_gguf_writer {
    lilac_buf kv;     /* serialised key/values */
    uint64_t n_kv;
    char **keys;
    int nkeys, capkeys;
    wtensor *t;
    int nt, capt;
    char err[256];    /* the first error, reported by lilac_gguf_write */
};

int lilac_ggml_block(int type, size_t *bb) {
    switch (type) {
    case LILAC_GGML_F32: return *bb = 4, 1;
    case LILAC_GGML_F16:
    case LILAC_GGML_BF16: return *bb = 2, 1;
    case LILAC_GGML_Q4_0: return *bb = 18, 32;
    case LILAC_GGML_Q4_1: return *bb = 20, 32;
    default: return *bb = 0, 0;
    }
}

size_t lilac_ggml_nbytes(int type, int ndim, const int64_t *ne) {
    size_t bb;
    const int blk = lilac_ggml_block(type, &bb);
    if (!blk || ndim < 1 || ndim > LILAC_GGUF_MAX_DIMS || ne[0] <= 0 || ne[0] % blk) return 0;
    uint64_t n = (uint64_t)(ne[0] / blk) * bb;
    for (int i = 1; i < ndim; i++) {
        if (ne[i] <= 0 || n > UINT64_MAX / (uint64_t)ne[i]) return 0;
        n *= (uint64_t)ne[i];
    }
    return n > (uint64_t)SIZE_MAX / 2 ? 0 : (size_t)n;
}

lilac_gguf_writer *lilac_gguf_writer_new(void) { return calloc(1, sizeof(lilac_gguf_writer)); }

void lilac_gguf_writer_free(lilac_gguf_writer *w) {
    if (!w) return;
    lilac_buf_free(&w->kv);
    for (int i = 0; i < w->nkeys; i++) free(w->keys[i]);
    free(w->keys);
    for (int i = 0; i < w->nt; i++) free(w->t[i].name);
    free(w->t);
    free(w);
}

static void fail(lilac_gguf_writer *w, const char *msg, const char *what) {
    if (!w->err[0]) snprintf(w->err, sizeof w->err, "%s: %s", what, msg);
}

static void put_u32(lilac_buf *b, uint32_t v) {
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    lilac_buf_append(b, x, 4);
}
static void put_u64(lilac_buf *b, uint64_t v) {
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}
static void put_str(lilac_buf *b, const char *s) {
    size_t n = strlen(s);
    put_u64(b, n);
    lilac_buf_append(b, s, n);
}

/* Starts a key/value: the key (checked for duplicates) and the type. */
static int key(lilac_gguf_writer *w, const char *k, uint32_t type) {
    if (!k || !*k) return fail(w, "empty key", "gguf"), 0;
    for (int i = 0; i < w->nkeys; i++)
        if (strcmp(w->keys[i], k) == 0) return fail(w, "key given twice", k), 0;
    if (w->nkeys == w->capkeys) {
        int cap = w->capkeys ? 2 * w->capkeys : 64;
        char **nk = realloc(w->keys, (size_t)cap * sizeof *nk);
        if (!nk) return fail(w, "out of memory", k), 0;
        w->keys = nk, w->capkeys = cap;
    }
    if (!(w->keys[w->nkeys] = strdup(k))) return fail(w, "out of memory", k), 0;
    w->nkeys++;
    put_str(&w->kv, k);
    put_u32(&w->kv, type);
    w->n_kv++;
    return 1;
}

void lilac_gguf_kv_u32(lilac_gguf_writer *w, const char *k, uint32_t v) {
    if (key(w, k, LILAC_GGUF_U32)) put_u32(&w->kv, v);
}
void lilac_gguf_kv_i32(lilac_gguf_writer *w, const char *k, int32_t v) {
    if (key(w, k, LILAC_GGUF_I32)) put_u32(&w->kv, (uint32_t)v);
}
void lilac_gguf_kv_f32(lilac_gguf_writer *w, const char *k, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    if (key(w, k, LILAC_GGUF_F32)) put_u32(&w->kv, u);
}
void lilac_gguf_kv_bool(lilac_gguf_writer *w, const char *k, int v) {
    unsigned char c = v != 0;
    if (key(w, k, LILAC_GGUF_BOOL)) lilac_buf_append(&w->kv, &c, 1);
}
void lilac_gguf_kv_str(lilac_gguf_writer *w, const char *k, const char *v) {
    if (key(w, k, LILAC_GGUF_STRING)) put_str(&w->kv, v ? v : "");
}
void lilac_gguf_kv_arr_i32(lilac_gguf_writer *w, const char *k, const int32_t *v, size_t n) {
    if (!key(w, k, LILAC_GGUF_ARRAY)) return;
    put_u32(&w->kv, LILAC_GGUF_I32);
    put_u64(&w->kv, n);
    for (size_t i = 0; i < n; i++) put_u32(&w->kv, (uint32_t)v[i]);
}
void lilac_gguf_kv_arr_bool(lilac_gguf_writer *w, const char *k, const uint8_t *v, size_t n) {
    if (!key(w, k, LILAC_GGUF_ARRAY)) return;
    put_u32(&w->kv, LILAC_GGUF_BOOL);
    put_u64(&w->kv, n);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = v[i] != 0;
        lilac_buf_append(&w->kv, &c, 1);
    }
}
void lilac_gguf_kv_arr_str(lilac_gguf_writer *w, const char *k, const char *const *v, size_t n) {
    if (!key(w, k, LILAC_GGUF_ARRAY)) return;
    put_u32(&w->kv, LILAC_GGUF_STRING);
    put_u64(&w->kv, n);
    for (size_t i = 0; i < n; i++) put_str(&w->kv, v[i] ? v[i] : "");
}

void lilac_gguf_tensor(lilac_gguf_writer *w, const char *name, int type, int ndim, const int64_t *ne,
                       lilac_gguf_data_fn fn, void *ctx) {
    if (!name || !*name) return fail(w, "empty tensor name", "gguf");
    for (int i = 0; i < w->nt; i++)
        if (strcmp(w->t[i].name, name) == 0) return fail(w, "tensor given twice", name);
    const size_t nb = lilac_ggml_nbytes(type, ndim, ne);
    if (!nb) return fail(w, "bad type or shape (ne[0] must be a whole number of blocks)", name);
    if (w->nt == w->capt) {
        int cap = w->capt ? 2 * w->capt : 256;
        wtensor *nt = realloc(w->t, (size_t)cap * sizeof *nt);
        if (!nt) return fail(w, "out of memory", name);
        w->t = nt, w->capt = cap;
    }
    wtensor *t = &w->t[w->nt];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) return fail(w, "out of memory", name);
    t->type = type, t->ndim = ndim, t->nbytes = nb, t->fn = fn, t->ctx = ctx;
    for (int i = 0; i < ndim; i++) t->ne[i] = ne[i];
    w->nt++;
}

void lilac_gguf_tensor_data(lilac_gguf_writer *w, int i, lilac_gguf_data_fn fn, void *ctx) {
    if (i < 0 || i >= w->nt) return fail(w, "no such tensor index", "gguf");
    w->t[i].fn = fn, w->t[i].ctx = ctx;
}

static const unsigned char zeros[LILAC_GGUF_ALIGNMENT];

lilac_status lilac_gguf_write(lilac_gguf_writer *w, const char *path,
                              void (*progress)(void *ctx, const char *stage, uint64_t done, uint64_t total),
                              void *progress_ctx, lilac_error *e) {
    if (w->err[0]) return lilac_fail(e, LILAC_EINVAL, "%s: %s", path, w->err);
    for (int i = 0; i < w->nt; i++)
        if (!w->t[i].fn) return lilac_fail(e, LILAC_EINVAL, "%s: tensor %s has no data", path, w->t[i].name);
    if (w->kv.oom) return lilac_fail(e, LILAC_ENOMEM, "%s: key/values", path);
    lilac_buf h = LILAC_BUF_INIT;
    lilac_buf_append(&h, "GGUF", 4);
    put_u32(&h, 3);
    put_u64(&h, (uint64_t)w->nt);
    put_u64(&h, w->n_kv);
    lilac_buf_append(&h, w->kv.data, w->kv.len);
    uint64_t off = 0, total = 0;
    for (int i = 0; i < w->nt; i++) {
        wtensor *t = &w->t[i];
        t->offset = off;
        put_str(&h, t->name);
        put_u32(&h, (uint32_t)t->ndim);
        for (int d = 0; d < t->ndim; d++) put_u64(&h, (uint64_t)t->ne[d]);
        put_u32(&h, (uint32_t)t->type);
        put_u64(&h, off);
        off += (t->nbytes + LILAC_GGUF_ALIGNMENT - 1) / LILAC_GGUF_ALIGNMENT * LILAC_GGUF_ALIGNMENT;
        total += t->nbytes;
    }
    while (h.len % LILAC_GGUF_ALIGNMENT) lilac_buf_putc(&h, 0);
    if (h.oom) {
        lilac_buf_free(&h);
        return lilac_fail(e, LILAC_ENOMEM, "%s: header", path);
    }
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        lilac_buf_free(&h);
        return lilac_fail(e, LILAC_EINVAL, "%s: path too long", path);
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        lilac_buf_free(&h);
        return lilac_fail(e, LILAC_EIO, "%s: cannot create", tmp);
    }
    lilac_status st = LILAC_OK;
    if (fwrite(h.data, 1, h.len, f) != h.len) st = lilac_fail(e, LILAC_EIO, "%s: write failed (disk full?)", tmp);
    const long long base = (long long)h.len;
    lilac_buf_free(&h);
    uint64_t done = 0;
    for (int i = 0; i < w->nt && !st; i++) {
        wtensor *t = &w->t[i];
        if (ftello(f) != base + (long long)t->offset) {
            st = lilac_fail(e, LILAC_EIO, "%s: tensor %s: at byte %lld, expected %llu", tmp, t->name, (long long)ftello(f),
                            (unsigned long long)(base + (long long)t->offset));
            break;
        }
        if ((st = t->fn(t->ctx, f, e))) break;
        const long long end = ftello(f);
        if (end != base + (long long)(t->offset + t->nbytes)) {
            st = lilac_fail(e, LILAC_EIO, "%s: tensor %s: wrote %lld bytes, its size is %zu", tmp, t->name,
                            end - base - (long long)t->offset, t->nbytes);
            break;
        }
        const size_t pad = (LILAC_GGUF_ALIGNMENT - t->nbytes % LILAC_GGUF_ALIGNMENT) % LILAC_GGUF_ALIGNMENT;
        if (pad && fwrite(zeros, 1, pad, f) != pad) st = lilac_fail(e, LILAC_EIO, "%s: write failed (disk full?)", tmp);
        done += t->nbytes;
        if (progress) progress(progress_ctx, "writing the GGUF", done, total);
    }
    if (fclose(f) != 0 && !st) st = lilac_fail(e, LILAC_EIO, "%s: write failed (disk full?)", tmp);
    if (!st && rename(tmp, path) != 0) st = lilac_fail(e, LILAC_EIO, "%s: cannot rename to %s", tmp, path);
    if (st) remove(tmp);
    return st;
}
