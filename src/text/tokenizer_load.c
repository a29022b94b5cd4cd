/* tokenizer_load.c — reading tokenizer.json (+ tokenizer_config.json) into a
 * lilac_tokenizer.
 *
 * The vocab and merges are read by the streaming reader of tokenizer_json.c
 * (the big part of the file); the small sections (added_tokens and the
 * normalizer/pre-tokenizer/decoder, which tokenizer_pipeline.c reads) and
 * tokenizer_config.json are parsed with jansson from their spans.  What lilac
 * cannot reproduce exactly is refused with LILAC_EUNSUPPORTED naming the
 * setting, rather than tokenized differently from Hugging Face.
 *
 * Supported model: BPE without dropout, byte fallback or subword
 * prefix/suffix; unk_token, fuse_unk and ignore_merges are honoured. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/tokenizer_impl.h"
#include "text/tokenizer_json.h"
#include "util/file.h"

#define MAX_FILE_BYTES ((size_t)1 << 30)
#define MAX_ID ((1 << 24) - 1) /* far above any real vocabulary; keeps arrays sane */

/* ---- the GPT-2 byte-level alphabet ------------------------------------- */

/* Bytes that are printable Latin-1 stand for themselves; the other 68 bytes
 * take code points 256, 257, ... in byte order.  This is the definition of
 * the ByteLevel pre-tokenizer, not data from a file. */
static void bytelevel_tables(int16_t char_to_byte[324]) {
    for (int c = 0; c < 324; c++) char_to_byte[c] = -1;
    int next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        char_to_byte[printable ? b : next++] = (int16_t)b;
    }
}

typedef struct {
    lilac_tokenizer *t;
    const char *path;
    lilac_error *e;
    int16_t char_to_byte[324];
    lilac_buf s1, s2, s3; /* scratch strings */
    /* vocab as read: (id, off, len) triples before tokens[] exists */
    int vocab_done, merges_done, merges_deferred, type_seen;
    size_t merges_start, merges_end;
    char *unk;
} loader;

/* Appends the raw bytes a vocab string stands for.  Like HF's ByteLevel
 * decoder, a string with any character outside the alphabet stands for its
 * own UTF-8 bytes. */
static void unbyte(loader *L, const char *s, size_t n, lilac_buf *out) {
    size_t start = out->len;
    lilac_buf_append(out, s, n); /* reserves room: the bytes are never longer */
    if (out->oom) return;
    unsigned char *w = (unsigned char *)out->data + start;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        int b = -1;
        size_t len = 1;
        if (p[i] < 0x80)
            b = L->char_to_byte[p[i]];
        else if (i + 1 < n && p[i] >= 0xC2 && p[i] <= 0xC5 && (p[i + 1] & 0xC0) == 0x80) {
            len = 2; /* the alphabet is U+0021..U+0143: at most two UTF-8 bytes */
            uint32_t cp = (uint32_t)(p[i] & 0x1F) << 6 | (p[i + 1] & 0x3F);
            if (cp < 324) b = L->char_to_byte[cp];
        }
        if (b < 0) { /* outside the alphabet: the token is its own UTF-8 */
            memcpy(out->data + start, s, n);
            out->len = start + n;
            out->data[out->len] = 0;
            return;
        }
        *w++ = (unsigned char)b;
        i += len;
    }
    out->len = (size_t)((char *)w - out->data);
    out->data[out->len] = 0;
}

static lilac_status arena_add(lilac_tokenizer *t, const void *p, size_t n, uint32_t *off, lilac_error *e) {
    if (t->arena_len + n > UINT32_MAX) return lilac_fail(e, LILAC_EFORMAT, "tokenizer: tokens exceed 4 GiB");
    if (t->arena_len + n > t->arena_cap) {
        size_t cap = t->arena_cap ? t->arena_cap : 1 << 20;
        while (cap < t->arena_len + n) cap *= 2;
        char *a = realloc(t->arena, cap);
        if (!a) return lilac_fail(e, LILAC_ENOMEM, "tokenizer: out of memory");
        t->arena = a;
        t->arena_cap = cap;
    }
    memcpy(t->arena + t->arena_len, p, n);
    *off = (uint32_t)t->arena_len;
    t->arena_len += n;
    return LILAC_OK;
}

static lilac_status grow_ids(lilac_tokenizer *t, int32_t n_ids, lilac_error *e) {
    if (n_ids <= t->n_ids) return LILAC_OK;
    tok_entry *p = realloc(t->tokens, (size_t)n_ids * sizeof *p);
    if (!p) return lilac_fail(e, LILAC_ENOMEM, "tokenizer: out of memory");
    memset(p + t->n_ids, 0, (size_t)(n_ids - t->n_ids) * sizeof *p);
    t->tokens = p;
    t->n_ids = n_ids;
    return LILAC_OK;
}

/* Short, printable excerpt of a token for messages. */
static const char *show(const char *s, size_t n, char buf[80]) {
    size_t k = 0;
    for (size_t i = 0; i < n && k < 70; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            k += (size_t)snprintf(buf + k, 80 - k, "\\x%02x", c);
        else
            buf[k++] = (char)c;
    }
    if (k > 75) k = 75;
    buf[k] = 0;
    return buf;
}

/* ---- vocab --------------------------------------------------------------- */

static lilac_status vocab_insert(lilac_tokenizer *t, int32_t id, lilac_error *e, const char *path) {
    const tok_entry *te = &t->tokens[id];
    uint32_t h = tok_hash(t->arena + te->off, te->len);
    uint32_t i = h & t->vocab_mask;
    while (t->vocab[i].id >= 0) {
        const tok_vslot *o = &t->vocab[i];
        if (o->hash == h && o->len == te->len && memcmp(t->arena + o->off, t->arena + te->off, te->len) == 0) {
            char b[80];
            return lilac_fail(e, LILAC_EFORMAT, "%s: model.vocab: ids %d and %d are the same token '%s'", path,
                              t->vocab[i].id, id, show(t->arena + te->off, te->len, b));
        }
        i = (i + 1) & t->vocab_mask;
    }
    t->vocab[i] = (tok_vslot){h, id, te->off, te->len};
    t->vocab_count++;
    return LILAC_OK;
}

static lilac_status parse_vocab(loader *L, lilac_tj *r) {
    lilac_tokenizer *t = L->t;
    lilac_status st;
    if (L->vocab_done) return lilac_tj_fail(r, "model.vocab given twice");
    if ((st = lilac_tj_begin(r, '{'))) return st;
    /* Read (id, bytes) pairs into a temporary list; tokens[] is sized after. */
    size_t cap = 1 << 16, n = 0;
    struct vent {
        int32_t id;
        uint32_t off, len;
    } *list = malloc(cap * sizeof *list);
    if (!list) return lilac_fail(L->e, LILAC_ENOMEM, "%s: out of memory", L->path);
    int first = 1, more;
    int32_t max_id = -1;
    while ((more = lilac_tj_next(r, '}', &first)) == 1) {
        long long id;
        if ((st = lilac_tj_key(r, &L->s1)) || (st = lilac_tj_int(r, 0, MAX_ID, &id))) goto fail;
        lilac_buf_clear(&L->s2);
        unbyte(L, L->s1.data, L->s1.len, &L->s2);
        if (L->s2.oom) {
            st = lilac_fail(L->e, LILAC_ENOMEM, "%s: out of memory", L->path);
            goto fail;
        }
        if (n == cap) {
            struct vent *p = realloc(list, 2 * cap * sizeof *list);
            if (!p) {
                st = lilac_fail(L->e, LILAC_ENOMEM, "%s: out of memory", L->path);
                goto fail;
            }
            list = p;
            cap *= 2;
        }
        uint32_t off;
        if ((st = arena_add(t, L->s2.data, L->s2.len, &off, L->e))) goto fail;
        list[n++] = (struct vent){(int32_t)id, off, (uint32_t)L->s2.len};
        if (id > max_id) max_id = (int32_t)id;
    }
    if (more < 0) {
        st = L->e ? L->e->code : LILAC_EFORMAT;
        goto fail;
    }
    if (n == 0) {
        st = lilac_fail(L->e, LILAC_EFORMAT, "%s: model.vocab is empty", L->path);
        goto fail;
    }
    if ((st = grow_ids(t, max_id + 1, L->e))) goto fail;
    for (size_t k = 0; k < n; k++) {
        tok_entry *te = &t->tokens[list[k].id];
        if (te->kind != TOK_NONE) {
            char a[80], b[80];
            st = lilac_fail(L->e, LILAC_EFORMAT, "%s: model.vocab: id %d is given to both '%s' and '%s'", L->path,
                            list[k].id, show(t->arena + te->off, te->len, a),
                            show(t->arena + list[k].off, list[k].len, b));
            goto fail;
        }
        *te = (tok_entry){list[k].off, list[k].len, TOK_BPE, 0};
    }
    uint32_t size = 1024;
    while (size < 2 * n) size *= 2;
    t->vocab = malloc(size * sizeof *t->vocab);
    if (!t->vocab) {
        st = lilac_fail(L->e, LILAC_ENOMEM, "%s: out of memory", L->path);
        goto fail;
    }
    for (uint32_t i = 0; i < size; i++) t->vocab[i] = (tok_vslot){0, -1, 0, 0};
    t->vocab_mask = size - 1;
    for (size_t k = 0; k < n; k++)
        if ((st = vocab_insert(t, list[k].id, L->e, L->path))) goto fail;
    free(list);
    L->vocab_done = 1;
    return LILAC_OK;
fail:
    free(list);
    return st;
}

/* ---- merges -------------------------------------------------------------- */

/* Builds the (left, right) -> (rank, merged) map from the merges in file
 * order.  Done after reading so that the size is known and so that each
 * slot's cache miss can be prefetched a few merges ahead. */
static lilac_status build_merge_map(lilac_tokenizer *t, const tok_mslot *list, size_t n, lilac_error *e) {
    uint32_t size = 1024;
    while (size < 2 * n) size *= 2; /* load factor <= 1/2 */
    t->merges = malloc(size * sizeof *t->merges);
    if (!t->merges) return lilac_fail(e, LILAC_ENOMEM, "tokenizer: out of memory");
    for (uint32_t i = 0; i < size; i++) t->merges[i].key = UINT64_MAX;
    t->merge_mask = size - 1;
    enum { AHEAD = 16 };
    for (size_t k = 0; k < n; k++) {
        if (k + AHEAD < n) __builtin_prefetch(&t->merges[(uint32_t)tok_mix64(list[k + AHEAD].key) & t->merge_mask], 1);
        uint32_t i = (uint32_t)tok_mix64(list[k].key) & t->merge_mask;
        while (t->merges[i].key != UINT64_MAX && t->merges[i].key != list[k].key) i = (i + 1) & t->merge_mask;
        if (t->merges[i].key == UINT64_MAX) t->merge_count++;
        t->merges[i] = list[k]; /* a repeated pair takes its later rank, as HF's HashMap collect does */
    }
    return LILAC_OK;
}

/* Three vocabulary lookups with their memory accesses overlapped: reading
 * merges is bound by cache misses in the 250K-entry map (slot, then the
 * token's bytes), and issuing the three lookups' misses together instead of
 * one after another takes a third off the load time. */
static void find3(const lilac_tokenizer *t, const char *const s[3], const size_t n[3], int32_t id[3]) {
    uint32_t h[3];
    const tok_vslot *v[3];
    for (int k = 0; k < 3; k++) {
        h[k] = tok_hash(s[k], n[k]);
        __builtin_prefetch(&t->vocab[h[k] & t->vocab_mask]);
    }
    for (int k = 0; k < 3; k++) { /* first slot whose hash and length match */
        uint32_t i = h[k] & t->vocab_mask;
        while (t->vocab[i].id >= 0 && (t->vocab[i].hash != h[k] || t->vocab[i].len != n[k]))
            i = (i + 1) & t->vocab_mask;
        v[k] = &t->vocab[i];
        if (v[k]->id >= 0) __builtin_prefetch(t->arena + v[k]->off);
    }
    for (int k = 0; k < 3; k++) {
        if (v[k]->id < 0)
            id[k] = -1;
        else if (memcmp(t->arena + v[k]->off, s[k], n[k]) == 0)
            id[k] = v[k]->id;
        else
            id[k] = tok_vocab_find(t, s[k], n[k], h[k]); /* a hash collision: the slow way */
    }
}

static lilac_status merge_fail(loader *L, lilac_tj *r, size_t k, const char *what, const char *s, size_t n) {
    char b[80], msg[256];
    snprintf(msg, sizeof msg, "model.merges[%zu]: %s '%s'", k, what, show(s, n, b));
    return lilac_tj_fail(r, msg);
}

static lilac_status parse_merges(loader *L, lilac_tj *r) {
    lilac_tokenizer *t = L->t;
    lilac_status st;
    if ((st = lilac_tj_begin(r, '['))) return st;
    int first = 1, more;
    uint32_t rank = 0;
    tok_mslot *list = NULL; /* (pair, rank, merged) in file order */
    size_t n = 0, cap = 0, k = 0;
    for (; (more = lilac_tj_next(r, ']', &first)) == 1; k++) {
        size_t item = r->i;
        size_t alen, blen;
        const char *a, *b;
        int c = lilac_tj_peek(r);
        if (c == '"') {
            if ((st = lilac_tj_string(r, &L->s1))) goto out;
            if (L->s1.len >= 8 && memcmp(L->s1.data, "#version", 8) == 0) continue;
            const char *sp = memchr(L->s1.data, ' ', L->s1.len);
            if (!sp || memchr(sp + 1, ' ', L->s1.len - (size_t)(sp + 1 - L->s1.data))) {
                r->i = item;
                st = merge_fail(L, r, k, "is not two tokens separated by one space:", L->s1.data, L->s1.len);
                goto out;
            }
            a = L->s1.data;
            alen = (size_t)(sp - a);
            b = sp + 1;
            blen = L->s1.len - alen - 1;
        } else if (c == '[') {
            int f2 = 1;
            r->i++;
            if (lilac_tj_next(r, ']', &f2) != 1 || lilac_tj_string(r, &L->s1) || lilac_tj_next(r, ']', &f2) != 1 ||
                lilac_tj_string(r, &L->s3) || lilac_tj_next(r, ']', &f2) != 0) {
                r->i = item;
                st = lilac_tj_fail(r, "model.merges: an item must be a pair of strings");
                goto out;
            }
            a = L->s1.data;
            alen = L->s1.len;
            b = L->s3.data;
            blen = L->s3.len;
        } else {
            st = lilac_tj_fail(r, "model.merges: expected \"a b\" or [\"a\", \"b\"]");
            goto out;
        }
        lilac_buf_clear(&L->s2);
        unbyte(L, a, alen, &L->s2);
        size_t araw = L->s2.len;
        unbyte(L, b, blen, &L->s2);
        if (L->s2.oom) {
            st = lilac_fail(L->e, LILAC_ENOMEM, "%s: out of memory", L->path);
            goto out;
        }
        const char *raw = L->s2.data;
        const char *sp[3] = {raw, raw + araw, raw};
        size_t sn[3] = {araw, L->s2.len - araw, L->s2.len};
        int32_t id[3];
        find3(t, sp, sn, id);
        if (id[0] < 0 || id[1] < 0 || id[2] < 0) {
            r->i = item;
            st = id[0] < 0   ? merge_fail(L, r, k, "names a token that is not in the vocab:", a, alen)
                 : id[1] < 0 ? merge_fail(L, r, k, "names a token that is not in the vocab:", b, blen)
                             : merge_fail(L, r, k, "makes a token that is not in the vocab:", raw, L->s2.len);
            goto out;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 1 << 16;
            tok_mslot *p = realloc(list, cap * sizeof *list);
            if (!p) {
                st = lilac_fail(L->e, LILAC_ENOMEM, "%s: out of memory", L->path);
                goto out;
            }
            list = p;
        }
        list[n++] = (tok_mslot){(uint64_t)(uint32_t)id[0] << 32 | (uint32_t)id[1], rank++, id[2]};
    }
    if (more < 0)
        st = L->e ? L->e->code : LILAC_EFORMAT;
    else
        st = build_merge_map(t, list, n, L->e);
    if (st == LILAC_OK) L->merges_done = 1;
out:
    free(list);
    return st;
}

/* ---- the model section --------------------------------------------------- */

/* Reads a true/false/null literal: 1, 0, or 0 for null; fails otherwise. */
static lilac_status read_bool(lilac_tj *r, const char *name, int *v) {
    size_t s, e;
    lilac_status st = lilac_tj_skip(r, &s, &e);
    if (st) return st;
    if (e - s == 4 && memcmp(r->s + s, "true", 4) == 0)
        *v = 1;
    else if ((e - s == 5 && memcmp(r->s + s, "false", 5) == 0) || (e - s == 4 && memcmp(r->s + s, "null", 4) == 0))
        *v = 0;
    else {
        char msg[128];
        r->i = s;
        snprintf(msg, sizeof msg, "model.%s must be true or false", name);
        return lilac_tj_fail(r, msg);
    }
    return LILAC_OK;
}

/* null or "" is accepted; anything else is unsupported. */
static lilac_status read_empty_string(loader *L, lilac_tj *r, const char *name) {
    if (lilac_tj_peek(r) == 'n') {
        int dummy;
        return read_bool(r, name, &dummy);
    }
    lilac_status st = lilac_tj_string(r, &L->s1);
    if (st) return st;
    if (L->s1.len)
        return lilac_fail(L->e, LILAC_EUNSUPPORTED, "%s: model.%s \"%.60s\" is not supported", L->path, name,
                          L->s1.data);
    return LILAC_OK;
}

static lilac_status parse_model(loader *L, lilac_tj *r) {
    lilac_tokenizer *t = L->t;
    lilac_status st;
    if ((st = lilac_tj_begin(r, '{'))) return st;
    int first = 1, more;
    while ((more = lilac_tj_next(r, '}', &first)) == 1) {
        if ((st = lilac_tj_key(r, &L->s3))) return st;
        const char *k = L->s3.data;
        if (strcmp(k, "type") == 0) {
            if ((st = lilac_tj_string(r, &L->s1))) return st;
            if (strcmp(L->s1.data, "BPE") != 0)
                return lilac_fail(L->e, LILAC_EUNSUPPORTED, "%s: model type '%.60s' is not supported (only BPE)",
                                  L->path, L->s1.data);
            L->type_seen = 1;
        } else if (strcmp(k, "vocab") == 0) {
            if ((st = parse_vocab(L, r))) return st;
        } else if (strcmp(k, "merges") == 0) {
            if (L->merges_done || L->merges_deferred) return lilac_tj_fail(r, "model.merges given twice");
            if (L->vocab_done) {
                if ((st = parse_merges(L, r))) return st;
            } else { /* merges before vocab: read them once the vocab is known */
                if ((st = lilac_tj_skip(r, &L->merges_start, &L->merges_end))) return st;
                L->merges_deferred = 1;
            }
        } else if (strcmp(k, "dropout") == 0) {
            if (lilac_tj_peek(r) != 'n')
                return lilac_fail(L->e, LILAC_EUNSUPPORTED, "%s: model.dropout (BPE dropout) is not supported",
                                  L->path);
            if ((st = lilac_tj_skip(r, NULL, NULL))) return st;
        } else if (strcmp(k, "unk_token") == 0) {
            if (lilac_tj_peek(r) == 'n') {
                if ((st = lilac_tj_skip(r, NULL, NULL))) return st;
            } else {
                if ((st = lilac_tj_string(r, &L->s1))) return st;
                free(L->unk);
                L->unk = malloc(L->s1.len + 1);
                if (!L->unk) return lilac_fail(L->e, LILAC_ENOMEM, "%s: out of memory", L->path);
                memcpy(L->unk, L->s1.data, L->s1.len + 1);
            }
        } else if (strcmp(k, "continuing_subword_prefix") == 0 || strcmp(k, "end_of_word_suffix") == 0) {
            char name[32];
            snprintf(name, sizeof name, "%s", k);
            if ((st = read_empty_string(L, r, name))) return st;
        } else if (strcmp(k, "fuse_unk") == 0) {
            if ((st = read_bool(r, "fuse_unk", &t->fuse_unk))) return st;
        } else if (strcmp(k, "ignore_merges") == 0) {
            if ((st = read_bool(r, "ignore_merges", &t->ignore_merges))) return st;
        } else if (strcmp(k, "byte_fallback") == 0) {
            int v;
            if ((st = read_bool(r, "byte_fallback", &v))) return st;
            if (v)
                return lilac_fail(L->e, LILAC_EUNSUPPORTED, "%s: model.byte_fallback=true is not supported", L->path);
        } else {
            if ((st = lilac_tj_skip(r, NULL, NULL))) return st;
        }
    }
    if (more < 0) return L->e ? L->e->code : LILAC_EFORMAT;
    if (!L->vocab_done) return lilac_fail(L->e, LILAC_EFORMAT, "%s: model has no vocab", L->path);
    if (L->merges_deferred) {
        lilac_tj r2 = *r;
        r2.i = L->merges_start;
        r2.n = L->merges_end;
        if ((st = parse_merges(L, &r2))) return st;
    }
    if (!L->merges_done) return lilac_fail(L->e, LILAC_EFORMAT, "%s: model has no merges", L->path);
    return LILAC_OK;
}

/* ---- added tokens ------------------------------------------------------- */

static lilac_status add_token(loader *L, const char *where, int32_t id, const char *content, size_t len, int special,
                              int lstrip, int rstrip, int single_word, int normalized) {
    lilac_tokenizer *t = L->t;
    char b1[80], b2[80];
    lilac_status st;
    for (int i = 0; i < t->n_added; i++) {
        tok_added *a = &t->added[i];
        int same = a->len == len && memcmp(a->content, content, len) == 0;
        if (a->id == id && same) return LILAC_OK; /* listed again (config repeats tokenizer.json) */
        if (a->id == id)
            return lilac_fail(L->e, LILAC_EFORMAT, "%s: added token id %d is '%s' here but '%s' before", where, id,
                              show(content, len, b1), show(a->content, a->len, b2));
        if (same)
            return lilac_fail(L->e, LILAC_EFORMAT, "%s: added token '%s' has id %d here but %d before", where,
                              show(content, len, b1), id, a->id);
    }
    if ((st = grow_ids(t, id + 1, L->e))) return st;
    tok_entry *te = &t->tokens[id];
    if (te->kind == TOK_BPE && !(te->len == len && memcmp(t->arena + te->off, content, len) == 0))
        return lilac_fail(L->e, LILAC_EUNSUPPORTED, "%s: added token '%s' takes id %d of vocab token '%s'", where,
                          show(content, len, b1), id, show(t->arena + te->off, te->len, b2));
    if (t->n_added % 16 == 0) {
        tok_added *p = realloc(t->added, (size_t)(t->n_added + 16) * sizeof *p);
        if (!p) return lilac_fail(L->e, LILAC_ENOMEM, "tokenizer: out of memory");
        t->added = p;
    }
    tok_added *a = &t->added[t->n_added];
    memset(a, 0, sizeof *a);
    a->content = malloc(len + 1);
    if (!a->content) return lilac_fail(L->e, LILAC_ENOMEM, "tokenizer: out of memory");
    memcpy(a->content, content, len);
    a->content[len] = 0;
    a->len = len;
    a->id = id;
    a->special = (uint8_t)special;
    a->lstrip = (uint8_t)lstrip;
    a->rstrip = (uint8_t)rstrip;
    a->single_word = (uint8_t)single_word;
    a->normalized = (uint8_t)normalized;
    t->n_added++;
    uint32_t off;
    if (te->kind != TOK_BPE) { /* a vocab token that is also added keeps its bytes */
        if ((st = arena_add(t, content, len, &off, L->e))) return st;
        te->off = off;
        te->len = (uint32_t)len;
    }
    te->kind = TOK_ADDED;
    te->special = (uint8_t)special;
    return LILAC_OK;
}

static int jbool(const json_t *o, const char *k, int dflt) {
    const json_t *v = json_object_get(o, k);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

/* One added-token object (tokenizer.json's added_tokens[i] or a config's
 * added_tokens_decoder value).  Missing flags take HF's AddedToken defaults
 * (normalized = !special). */
static lilac_status added_from_json(loader *L, const char *where, const json_t *o, json_int_t id) {
    const json_t *c = json_object_get(o, "content");
    if (!json_is_object(o) || !json_is_string(c))
        return lilac_fail(L->e, LILAC_EFORMAT, "%s: an added token needs a string \"content\"", where);
    if (id < 0 || id > MAX_ID)
        return lilac_fail(L->e, LILAC_EFORMAT, "%s: added token id %lld out of range", where, (long long)id);
    size_t len = json_string_length(c);
    if (len == 0) return LILAC_OK; /* HF ignores empty added tokens */
    int special = jbool(o, "special", 0);
    return add_token(L, where, (int32_t)id, json_string_value(c), len, special, jbool(o, "lstrip", 0),
                     jbool(o, "rstrip", 0), jbool(o, "single_word", 0), jbool(o, "normalized", !special));
}

static lilac_status parse_added(loader *L, const json_t *arr) {
    char where[600];
    if (!arr || json_is_null(arr)) return LILAC_OK;
    if (!json_is_array(arr)) return lilac_fail(L->e, LILAC_EFORMAT, "%s: added_tokens is not an array", L->path);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *o = json_array_get(arr, i);
        snprintf(where, sizeof where, "%s: added_tokens[%zu]", L->path, i);
        const json_t *id = json_object_get(o, "id");
        if (!json_is_integer(id)) return lilac_fail(L->e, LILAC_EFORMAT, "%s: needs an integer \"id\"", where);
        lilac_status st = added_from_json(L, where, o, json_integer_value(id));
        if (st) return st;
    }
    return LILAC_OK;
}

static lilac_status parse_config(loader *L, const char *path) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) return lilac_fail(L->e, LILAC_EFORMAT, "%s: line %d, column %d: %s", path, je.line, je.column, je.text);
    lilac_status st = LILAC_OK;
    const json_t *dec = json_object_get(root, "added_tokens_decoder");
    if (dec && !json_is_object(dec)) {
        st = lilac_fail(L->e, LILAC_EFORMAT, "%s: added_tokens_decoder is not an object", path);
    } else if (dec) {
        const char *key;
        json_t *v;
        char where[600];
        json_object_foreach((json_t *)dec, key, v) {
            long long id = 0;
            char *end = NULL;
            id = strtoll(key, &end, 10);
            snprintf(where, sizeof where, "%s: added_tokens_decoder[\"%.40s\"]", path, key);
            if (!*key || *end || end == key) {
                st = lilac_fail(L->e, LILAC_EFORMAT, "%s: key is not an integer id", where);
                break;
            }
            if ((st = added_from_json(L, where, v, (json_int_t)id))) break;
        }
    }
    json_decref(root);
    return st;
}

/* ---- putting it together ------------------------------------------------- */

enum { SEC_ADDED, SEC_NORM, SEC_PRE, SEC_POST, SEC_DEC, NSEC };
static const char *const SECTION[NSEC] = {"added_tokens", "normalizer", "pre_tokenizer", "post_processor", "decoder"};

static lilac_status parse_file(loader *L, const char *text, size_t len) {
    lilac_tj r = {text, len, 0, L->path, L->e};
    lilac_status st;
    size_t span[NSEC][2];
    int have[NSEC] = {0}, model = 0;
    if (lilac_tj_peek(&r) != '{') return lilac_tj_fail(&r, len ? "expected a JSON object at the top" : "file is empty");
    r.i++;
    int first = 1, more;
    while ((more = lilac_tj_next(&r, '}', &first)) == 1) {
        if ((st = lilac_tj_key(&r, &L->s3))) return st;
        int sec = -1;
        for (int k = 0; k < NSEC; k++)
            if (strcmp(L->s3.data, SECTION[k]) == 0) sec = k;
        if (strcmp(L->s3.data, "model") == 0) {
            if (model) return lilac_tj_fail(&r, "\"model\" given twice");
            if (lilac_tj_peek(&r) != '{') return lilac_tj_fail(&r, "\"model\" must be an object");
            if ((st = parse_model(L, &r))) return st;
            model = 1;
        } else if (sec >= 0) {
            if ((st = lilac_tj_skip(&r, &span[sec][0], &span[sec][1]))) return st;
            have[sec] = 1;
        } else if ((st = lilac_tj_skip(&r, NULL, NULL))) {
            return st;
        }
    }
    if (more < 0) return L->e ? L->e->code : LILAC_EFORMAT;
    if (lilac_tj_peek(&r) >= 0) return lilac_tj_fail(&r, "unexpected data after the JSON document");
    if (!model) return lilac_fail(L->e, LILAC_EFORMAT, "%s: no \"model\" section", L->path);

    json_t *js[NSEC] = {0};
    for (int k = 0; k < NSEC; k++) {
        if (!have[k]) continue;
        json_error_t je;
        js[k] = json_loadb(text + span[k][0], span[k][1] - span[k][0], JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!js[k]) {
            st = lilac_fail(L->e, LILAC_EFORMAT, "%s: %s: %s", L->path, SECTION[k], je.text);
            goto done;
        }
    }
    if ((st = parse_added(L, js[SEC_ADDED])) == LILAC_OK)
        st = lilac_tok_read_pipeline(L->t, L->path, js[SEC_NORM], js[SEC_PRE], js[SEC_POST], js[SEC_DEC], L->e);
done:
    for (int k = 0; k < NSEC; k++) json_decref(js[k]);
    return st;
}

/* Match strings of the added tokens, the first-byte filter, and the helper
 * regexes for lstrip/rstrip/single_word (Rust regex's \w and \s, which HF
 * uses for them). */
static lilac_status finish_added(loader *L) {
    lilac_tokenizer *t = L->t;
    memset(t->added_first, 0, sizeof t->added_first);
    for (int i = 0; i < t->n_added; i++) {
        tok_added *a = &t->added[i];
        a->match = a->content;
        a->match_len = a->len;
        if (a->normalized && t->nfc) {
            utf8proc_uint8_t *nfc = NULL;
            utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)a->content, (utf8proc_ssize_t)a->len, &nfc,
                                              UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            if (n < 0)
                return lilac_fail(L->e, LILAC_EFORMAT, "%s: added token %d: cannot NFC-normalize it", L->path, a->id);
            a->match = (char *)nfc;
            a->match_len = (size_t)n;
            if (n == 0) continue;
        }
        t->added_first[(unsigned char)a->match[0]] |= a->normalized ? 2 : 1;
        t->has_normalized_added |= a->normalized;
        t->needs_word_classes |= a->lstrip || a->rstrip || a->single_word;
    }
    return t->needs_word_classes ? lilac_tok_word_classes(t, L->path, L->e) : LILAC_OK;
}

lilac_status lilac_tokenizer_load_files(const char *json_path, const char *config_path, lilac_tokenizer **out,
                                        lilac_error *e) {
    *out = NULL;
    /* Mapped rather than read: no copy, no zeroed pages for 10-20 MB. */
    lilac_mapping map;
    lilac_status st = lilac_map_file(json_path, &map, e);
    if (st == LILAC_EFORMAT) return lilac_fail(e, LILAC_EFORMAT, "%s: file is empty", json_path);
    if (st) return st;
    if (map.size > MAX_FILE_BYTES) {
        lilac_unmap_file(&map);
        return lilac_fail(e, LILAC_EFORMAT, "%s: file is larger than 1 GiB", json_path);
    }
    lilac_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        lilac_unmap_file(&map);
        return lilac_fail(e, LILAC_ENOMEM, "tokenizer: out of memory");
    }
    t->unk_id = -1;
    loader L = {.t = t, .path = json_path, .e = e};
    bytelevel_tables(L.char_to_byte);
    st = parse_file(&L, (const char *)map.data, map.size);
    lilac_unmap_file(&map);
    if (!st && config_path) st = parse_config(&L, config_path);
    if (!st && L.unk) {
        lilac_buf_clear(&L.s2);
        unbyte(&L, L.unk, strlen(L.unk), &L.s2);
        t->unk_id = tok_vocab_find(t, L.s2.data, L.s2.len, tok_hash(L.s2.data, L.s2.len));
        if (t->unk_id < 0)
            st = lilac_fail(e, LILAC_EFORMAT, "%s: unk_token '%.60s' is not in the vocab", json_path, L.unk);
    }
    if (!st) {
        for (int b = 0; b < 256; b++) {
            unsigned char c = (unsigned char)b;
            t->byte_id[b] = tok_vocab_find(t, &c, 1, tok_hash(&c, 1));
        }
        st = finish_added(&L);
    }
    if (!st) st = lilac_tok_cache_init(t, e);
    lilac_buf_free(&L.s1);
    lilac_buf_free(&L.s2);
    lilac_buf_free(&L.s3);
    free(L.unk);
    if (st) {
        lilac_tokenizer_free(t);
        return st;
    }
    *out = t;
    return LILAC_OK;
}

lilac_status lilac_tokenizer_load(const char *dir, lilac_tokenizer **out, lilac_error *e) {
    char json_path[4096], config_path[4096];
    lilac_status st = lilac_path_join(json_path, sizeof json_path, dir, "tokenizer.json", e);
    if (!st) st = lilac_path_join(config_path, sizeof config_path, dir, "tokenizer_config.json", e);
    if (st) return st;
    return lilac_tokenizer_load_files(json_path, lilac_file_exists(config_path) ? config_path : NULL, out, e);
}

void lilac_tokenizer_free(lilac_tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_added; i++) {
        if (t->added[i].match != t->added[i].content) free(t->added[i].match);
        free(t->added[i].content);
    }
    free(t->added);
    free(t->tokens);
    free(t->arena);
    free(t->vocab);
    free(t->merges);
    pcre2_code_free(t->split);
    pcre2_code_free(t->re_word);
    pcre2_code_free(t->re_space);
    lilac_tok_cache_free(t);
    free(t);
}
