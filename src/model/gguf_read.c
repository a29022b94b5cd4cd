/* gguf_read.c — the validating GGUF reader (see gguf.h): every length,
 * count and offset is checked against the bytes that are there before it is
 * used, so a truncated or hostile file is an error naming the byte, never a
 * crash.  Used by the tests of the writer and the exporter. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"

typedef struct {
    const unsigned char *p;
    size_t size, off;
    const char *where;
    lilac_error *e;
} rd;

static int need(rd *r, uint64_t n) {
    if (n > r->size - r->off) {
        lilac_fail(r->e, LILAC_EFORMAT, "%s: byte %zu: %llu bytes needed, %zu left", r->where, r->off,
                   (unsigned long long)n, r->size - r->off);
        return 0;
    }
    return 1;
}
static int u32(rd *r, uint32_t *v) {
    if (!need(r, 4)) return 0;
    const unsigned char *q = r->p + r->off;
    *v = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
    r->off += 4;
    return 1;
}
static int u64(rd *r, uint64_t *v) {
    uint32_t lo, hi;
    if (!u32(r, &lo) || !u32(r, &hi)) return 0;
    *v = (uint64_t)hi << 32 | lo;
    return 1;
}
/* A string: a copy (NUL-terminated) when out is set; strings hold no NUL. */
static int str(rd *r, char **out) {
    uint64_t n;
    const size_t at = r->off;
    if (!u64(r, &n) || !need(r, n)) return 0;
    if (n > (1u << 30) || memchr(r->p + r->off, 0, (size_t)n))
        return lilac_fail(r->e, LILAC_EFORMAT, "%s: byte %zu: bad string", r->where, at), 0;
    if (out) {
        if (!(*out = malloc((size_t)n + 1))) return lilac_fail(r->e, LILAC_ENOMEM, "%s: string", r->where), 0;
        memcpy(*out, r->p + r->off, (size_t)n);
        (*out)[n] = 0;
    }
    r->off += (size_t)n;
    return 1;
}

static int scalar_size(uint32_t t) {
    switch (t) {
    case LILAC_GGUF_U8: case LILAC_GGUF_I8: case LILAC_GGUF_BOOL: return 1;
    case LILAC_GGUF_U16: case LILAC_GGUF_I16: return 2;
    case LILAC_GGUF_U32: case LILAC_GGUF_I32: case LILAC_GGUF_F32: return 4;
    case LILAC_GGUF_U64: case LILAC_GGUF_I64: case LILAC_GGUF_F64: return 8;
    default: return 0;
    }
}

static void scalar(uint32_t t, const unsigned char *q, lilac_gguf_kv *kv) {
    uint64_t u = 0;
    const int n = scalar_size(t);
    for (int i = 0; i < n; i++) u |= (uint64_t)q[i] << (8 * i);
    switch (t) {
    case LILAC_GGUF_I8: kv->u = (uint64_t)(int64_t)(int8_t)u; break;
    case LILAC_GGUF_I16: kv->u = (uint64_t)(int64_t)(int16_t)u; break;
    case LILAC_GGUF_I32: kv->u = (uint64_t)(int64_t)(int32_t)u; break;
    case LILAC_GGUF_F32: {
        float f;
        uint32_t w = (uint32_t)u;
        memcpy(&f, &w, 4);
        kv->f = f;
        break;
    }
    case LILAC_GGUF_F64: memcpy(&kv->f, &u, 8); break;
    default: kv->u = u;
    }
}

void lilac_gguf_free(lilac_gguf *g) {
    if (!g) return;
    for (int i = 0; i < g->n_kv; i++) free((char *)g->kv[i].key), free(g->kv[i].str);
    for (int i = 0; i < g->n_tensors; i++) free(g->t[i].name);
    free(g->kv);
    free(g->t);
    memset(g, 0, sizeof *g);
}

static int cmp_off(const void *a, const void *b) {
    const lilac_gguf_tensor_info *x = *(lilac_gguf_tensor_info *const *)a, *y = *(lilac_gguf_tensor_info *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

lilac_status lilac_gguf_parse(const unsigned char *data, size_t size, const char *where, lilac_gguf *g, lilac_error *e) {
    memset(g, 0, sizeof *g);
    rd r = {data, size, 0, where, e};
    uint32_t magic, ver;
    uint64_t nt, nkv;
    if (!need(&r, 4) || memcmp(data, "GGUF", 4) != 0) return lilac_fail(e, LILAC_EFORMAT, "%s: not a GGUF file (magic)", where);
    r.off = 4;
    (void)magic;
    if (!u32(&r, &ver)) return e->code;
    if (ver != 2 && ver != 3) return lilac_fail(e, LILAC_EFORMAT, "%s: GGUF version %u (2 and 3 are known)", where, ver);
    g->version = ver;
    if (!u64(&r, &nt) || !u64(&r, &nkv)) return e->code;
    /* each key/value takes at least 13 bytes, each tensor info at least 24 */
    if (nkv > (size - r.off) / 13 || nt > (size - r.off) / 24)
        return lilac_fail(e, LILAC_EFORMAT, "%s: %llu key/values and %llu tensors cannot fit in %zu bytes", where,
                          (unsigned long long)nkv, (unsigned long long)nt, size);
    g->kv = calloc(nkv ? (size_t)nkv : 1, sizeof *g->kv);
    g->t = calloc(nt ? (size_t)nt : 1, sizeof *g->t);
    if (!g->kv || !g->t) return lilac_gguf_free(g), lilac_fail(e, LILAC_ENOMEM, "%s: tables", where);
    g->alignment = LILAC_GGUF_ALIGNMENT;
    for (uint64_t i = 0; i < nkv; i++) {
        lilac_gguf_kv *kv = &g->kv[g->n_kv];
        const size_t at = r.off;
        if (!str(&r, (char **)&kv->key)) goto bad;
        g->n_kv++;
        for (int j = 0; j + 1 < g->n_kv; j++)
            if (strcmp(g->kv[j].key, kv->key) == 0) {
                lilac_fail(e, LILAC_EFORMAT, "%s: byte %zu: key %s given twice", where, at, kv->key);
                goto bad;
            }
        if (!u32(&r, &kv->type)) goto bad;
        if (kv->type == LILAC_GGUF_STRING) {
            if (!str(&r, &kv->str)) goto bad;
        } else if (kv->type == LILAC_GGUF_ARRAY) {
            if (!u32(&r, &kv->arr_type) || !u64(&r, &kv->arr_n)) goto bad;
            kv->val = data + r.off;
            if (kv->arr_type == LILAC_GGUF_STRING) {
                if (kv->arr_n > (size - r.off) / 8) {
                    lilac_fail(e, LILAC_EFORMAT, "%s: key %s: %llu strings cannot fit", where, kv->key,
                               (unsigned long long)kv->arr_n);
                    goto bad;
                }
                for (uint64_t k = 0; k < kv->arr_n; k++)
                    if (!str(&r, NULL)) goto bad;
            } else {
                const int es = scalar_size(kv->arr_type);
                if (!es) {
                    lilac_fail(e, LILAC_EFORMAT, "%s: key %s: array of type %u (nested arrays are not read)", where, kv->key,
                               kv->arr_type);
                    goto bad;
                }
                if (kv->arr_n > (size - r.off) / (uint64_t)es) {
                    need(&r, UINT64_MAX);
                    goto bad;
                }
                r.off += (size_t)kv->arr_n * (size_t)es;
            }
        } else {
            const int es = scalar_size(kv->type);
            if (!es) {
                lilac_fail(e, LILAC_EFORMAT, "%s: key %s: unknown type %u", where, kv->key, kv->type);
                goto bad;
            }
            if (!need(&r, (uint64_t)es)) goto bad;
            kv->val = data + r.off;
            scalar(kv->type, kv->val, kv);
            r.off += (size_t)es;
        }
        if (strcmp(kv->key, "general.alignment") == 0) {
            if (kv->type != LILAC_GGUF_U32 || kv->u == 0 || (kv->u & (kv->u - 1)) || kv->u > 65536) {
                lilac_fail(e, LILAC_EFORMAT, "%s: general.alignment must be a u32 power of two up to 65536", where);
                goto bad;
            }
            g->alignment = (size_t)kv->u;
        }
    }
    for (uint64_t i = 0; i < nt; i++) {
        lilac_gguf_tensor_info *t = &g->t[g->n_tensors];
        const size_t at = r.off;
        uint32_t nd, type;
        if (!str(&r, &t->name)) goto bad;
        g->n_tensors++;
        if (!u32(&r, &nd)) goto bad;
        if (nd < 1 || nd > LILAC_GGUF_MAX_DIMS) {
            lilac_fail(e, LILAC_EFORMAT, "%s: byte %zu: tensor %s has %u dimensions", where, at, t->name, nd);
            goto bad;
        }
        t->ndim = (int)nd;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t v;
            if (!u64(&r, &v)) goto bad;
            if (v == 0 || v > (1ull << 40)) {
                lilac_fail(e, LILAC_EFORMAT, "%s: tensor %s: dimension %u is %llu", where, t->name, d, (unsigned long long)v);
                goto bad;
            }
            t->ne[d] = (int64_t)v;
        }
        if (!u32(&r, &type) || !u64(&r, &t->offset)) goto bad;
        t->type = (int)type;
        if (!(t->nbytes = lilac_ggml_nbytes(t->type, t->ndim, t->ne))) {
            lilac_fail(e, LILAC_EFORMAT, "%s: tensor %s: type %u with ne[0] = %lld is not readable here", where, t->name, type,
                       (long long)t->ne[0]);
            goto bad;
        }
        for (int j = 0; j + 1 < g->n_tensors; j++)
            if (strcmp(g->t[j].name, t->name) == 0) {
                lilac_fail(e, LILAC_EFORMAT, "%s: tensor %s given twice", where, t->name);
                goto bad;
            }
    }
    g->data_offset = (r.off + g->alignment - 1) / g->alignment * g->alignment;
    if (g->data_offset > size) {
        lilac_fail(e, LILAC_EFORMAT, "%s: the data section (byte %zu) is past the end (%zu bytes)", where, g->data_offset, size);
        goto bad;
    }
    const size_t dsize = size - g->data_offset;
    for (int i = 0; i < g->n_tensors; i++) {
        lilac_gguf_tensor_info *t = &g->t[i];
        if (t->offset % g->alignment || t->offset > dsize || t->nbytes > dsize - t->offset) {
            lilac_fail(e, LILAC_EFORMAT, "%s: tensor %s: %zu bytes at data offset %llu: misaligned or past the end (%zu)", where,
                       t->name, t->nbytes, (unsigned long long)t->offset, dsize);
            goto bad;
        }
        t->data = data + g->data_offset + t->offset;
    }
    if (g->n_tensors > 1) {
        lilac_gguf_tensor_info **by = malloc((size_t)g->n_tensors * sizeof *by);
        if (!by) {
            lilac_fail(e, LILAC_ENOMEM, "%s: tensor order", where);
            goto bad;
        }
        for (int i = 0; i < g->n_tensors; i++) by[i] = &g->t[i];
        qsort(by, (size_t)g->n_tensors, sizeof *by, cmp_off);
        for (int i = 1; i < g->n_tensors; i++)
            if (by[i]->offset < by[i - 1]->offset + by[i - 1]->nbytes) {
                lilac_fail(e, LILAC_EFORMAT, "%s: tensors %s and %s overlap", where, by[i - 1]->name, by[i]->name);
                free(by);
                goto bad;
            }
        free(by);
    }
    return LILAC_OK;
bad:
    lilac_gguf_free(g);
    return e && e->code ? e->code : LILAC_EFORMAT;
}

const lilac_gguf_kv *lilac_gguf_find_kv(const lilac_gguf *g, const char *key) {
    for (int i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, key) == 0) return &g->kv[i];
    return NULL;
}

const lilac_gguf_tensor_info *lilac_gguf_find_tensor(const lilac_gguf *g, const char *name) {
    for (int i = 0; i < g->n_tensors; i++)
        if (strcmp(g->t[i].name, name) == 0) return &g->t[i];
    return NULL;
}

float lilac_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h >> 15) << 31, ex = (h >> 10) & 31, man = h & 1023;
    float f;
    if (ex == 0) f = ldexpf((float)man, -24);
    else if (ex == 31) f = man ? NAN : INFINITY;
    else f = ldexpf((float)(man | 1024), (int)ex - 25);
    uint32_t u;
    memcpy(&u, &f, 4);
    u |= sign;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t lilac_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    const float a = fabsf(f);
    if (isnan(f)) return sign | 0x7e00;
    if (a >= 65520.0f) return sign | 0x7c00; /* rounds to infinity */
    if (a < 6.103515625e-05f) {             /* subnormal: multiples of 2^-24, nearest even */
        const float q = a * 16777216.0f;    /* exact: a power-of-two scale */
        return sign | (uint16_t)lrintf(q);
    }
    int ex;
    const float m = frexpf(a, &ex); /* a = m * 2^ex, m in [0.5, 1) */
    long mant = lrintf(ldexpf(m, 11)); /* 11 significant bits, nearest even */
    if (mant == 2048) mant = 1024, ex++;
    return sign | (uint16_t)((ex + 14) << 10 | (mant - 1024));
}

int lilac_gguf_row_f32(const lilac_gguf_tensor_info *t, int64_t r, float *out) {
    int64_t rows = 1;
    for (int i = 1; i < t->ndim; i++) rows *= t->ne[i];
    if (r < 0 || r >= rows) return -1;
    const int64_t n = t->ne[0];
    const size_t rb = lilac_ggml_nbytes(t->type, 1, &t->ne[0]);
    const unsigned char *p = t->data + (size_t)r * rb;
    switch (t->type) {
    case LILAC_GGML_F32: memcpy(out, p, (size_t)n * 4); return 0;
    case LILAC_GGML_F16:
    case LILAC_GGML_BF16:
        for (int64_t i = 0; i < n; i++) {
            const uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
            if (t->type == LILAC_GGML_F16) out[i] = lilac_f16_to_f32(h);
            else {
                const uint32_t u = (uint32_t)h << 16;
                memcpy(&out[i], &u, 4);
            }
        }
        return 0;
    case LILAC_GGML_Q4_0:
    case LILAC_GGML_Q4_1: {
        const int q1 = t->type == LILAC_GGML_Q4_1, bb = q1 ? 20 : 18;
        for (int64_t b = 0; b < n / 32; b++) {
            const unsigned char *blk = p + (size_t)b * (size_t)bb;
            const float d = lilac_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
            const float m = q1 ? lilac_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8)) : 0.0f;
            const unsigned char *qs = blk + (q1 ? 4 : 2);
            float *o = out + b * 32;
            /* ggml: element j is the low nibble of qs[j], element j + 16 the high one */
            for (int j = 0; j < 16; j++) {
                const int lo = qs[j] & 15, hi = qs[j] >> 4;
                if (q1) o[j] = (float)lo * d + m, o[j + 16] = (float)hi * d + m;
                else o[j] = (float)(lo - 8) * d, o[j + 16] = (float)(hi - 8) * d;
            }
        }
        return 0;
    }
    default: return -1;
    }
}
