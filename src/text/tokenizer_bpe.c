/* tokenizer_bpe.c — BPE over the bytes of one pre-token, and the word cache.
 *
 * The merge order is exactly Hugging Face's (models/bpe/word.rs merge_all):
 * a min-heap of candidate merges ordered by (rank, position of the left
 * symbol); a popped candidate is applied only if the two symbols it names are
 * still adjacent and still form that pair, and each merge pushes the new pairs
 * it forms with its neighbours.  Symbols are a doubly linked list over an
 * array indexed by the original byte position, so positions stay stable.
 *
 * The cache maps a pre-token's bytes to its ids.  English prose repeats a few
 * thousand words, so most pre-tokens are answered from the cache. */
#include <stdlib.h>

#include "text/tokenizer_impl.h"

typedef struct {
    int32_t id;
    int32_t prev, next; /* -1 at the ends */
    int alive;
} sym;

typedef struct {
    uint32_t rank;
    uint32_t pos; /* index of the left symbol */
    int32_t merged;
} cand;

struct lilac_tok_scratch {
    sym *syms;
    size_t sym_cap;
    cand *heap;
    size_t heap_cap, heap_len;
};

lilac_tok_scratch *lilac_tok_scratch_new(void) { return calloc(1, sizeof(lilac_tok_scratch)); }

void lilac_tok_scratch_free(lilac_tok_scratch *s) {
    if (!s) return;
    free(s->syms);
    free(s->heap);
    free(s);
}

static int reserve(lilac_tok_scratch *s, size_t n) {
    if (n > s->sym_cap) {
        size_t cap = s->sym_cap ? s->sym_cap : 64;
        while (cap < n) cap *= 2;
        sym *p = realloc(s->syms, cap * sizeof *p);
        if (!p) return 0;
        s->syms = p;
        s->sym_cap = cap;
    }
    if (3 * n > s->heap_cap) { /* n-1 initial pairs + at most 2 per merge */
        size_t cap = s->heap_cap ? s->heap_cap : 192;
        while (cap < 3 * n) cap *= 2;
        cand *p = realloc(s->heap, cap * sizeof *p);
        if (!p) return 0;
        s->heap = p;
        s->heap_cap = cap;
    }
    return 1;
}

static inline int cand_less(const cand *a, const cand *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(lilac_tok_scratch *s, cand c) {
    size_t i = s->heap_len++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!cand_less(&c, &s->heap[up])) break;
        s->heap[i] = s->heap[up];
        i = up;
    }
    s->heap[i] = c;
}

static cand heap_pop(lilac_tok_scratch *s) {
    cand top = s->heap[0], last = s->heap[--s->heap_len];
    size_t i = 0, n = s->heap_len;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= n) break;
        size_t m = (l + 1 < n && cand_less(&s->heap[l + 1], &s->heap[l])) ? l + 1 : l;
        if (!cand_less(&s->heap[m], &last)) break;
        s->heap[i] = s->heap[m];
        i = m;
    }
    if (n) s->heap[i] = last;
    return top;
}

static void push_pair(const lilac_tokenizer *t, lilac_tok_scratch *s, int32_t left) {
    int32_t right = s->syms[left].next;
    if (right < 0) return;
    uint32_t rank;
    int32_t merged;
    if (tok_merge_find(t, s->syms[left].id, s->syms[right].id, &rank, &merged))
        heap_push(s, (cand){rank, (uint32_t)left, merged});
}

static int cache_get(const lilac_tokenizer *t, uint32_t h, const unsigned char *p, size_t n, lilac_ids *out,
                     lilac_error *e, lilac_status *st) {
    uint32_t slot = h & (TOK_CACHE_SLOTS - 1);
    int32_t ids[TOK_CACHE_IDS];
    int nids = -1;
    pthread_mutex_t *lock = &t->cache_lock[slot % TOK_CACHE_LOCKS];
    pthread_mutex_lock(lock);
    const tok_cache_entry *c = &t->cache[slot];
    if (c->klen == n && c->hash == h && memcmp(c->key, p, n) == 0) {
        nids = c->nids;
        memcpy(ids, c->ids, (size_t)nids * sizeof ids[0]);
    }
    pthread_mutex_unlock(lock);
    if (nids < 0) return 0;
    *st = LILAC_OK;
    for (int k = 0; k < nids && !*st; k++) *st = lilac_ids_push(out, ids[k], e);
    return 1;
}

static void cache_put(const lilac_tokenizer *t, uint32_t h, const unsigned char *p, size_t n, const int32_t *ids,
                      size_t nids) {
    uint32_t slot = h & (TOK_CACHE_SLOTS - 1);
    pthread_mutex_t *lock = &t->cache_lock[slot % TOK_CACHE_LOCKS];
    pthread_mutex_lock(lock);
    /* The cache is the one mutable part of a tokenizer; writes happen only
     * under the slot's lock (see tokenizer.h on thread safety). */
    tok_cache_entry *c = &t->cache[slot];
    c->hash = h;
    c->klen = (uint8_t)n;
    c->nids = (uint8_t)nids;
    memcpy(c->key, p, n);
    memcpy(c->ids, ids, nids * sizeof ids[0]);
    pthread_mutex_unlock(lock);
}

lilac_status lilac_tok_bpe(const lilac_tokenizer *t, lilac_tok_scratch *s, const unsigned char *p, size_t n, int flags,
                           lilac_ids *out, lilac_error *e) {
    if (n == 0) return LILAC_OK;
    int use_cache = t->cache_ready && !(flags & LILAC_TOK_NO_CACHE) && n <= TOK_CACHE_KEY;
    uint32_t h = 0;
    lilac_status st;
    if (use_cache) {
        h = tok_hash(p, n);
        if (cache_get(t, h, p, n, out, e, &st)) return st;
    }
    if (t->ignore_merges) {
        int32_t id = tok_vocab_find(t, p, n, use_cache ? h : tok_hash(p, n));
        if (id >= 0) return lilac_ids_push(out, id, e);
    }
    if (!reserve(s, n)) return lilac_fail(e, LILAC_ENOMEM, "tokenizer: out of memory (word of %zu bytes)", n);

    /* One symbol per byte; bytes without a token become unk or vanish. */
    int32_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[p[i]];
        if (id < 0) {
            if (t->unk_id < 0) continue;
            if (t->fuse_unk && ns > 0 && s->syms[ns - 1].id == t->unk_id) continue;
            id = t->unk_id;
        }
        s->syms[ns] = (sym){id, ns - 1, ns + 1, 1};
        ns++;
    }
    if (ns == 0) return LILAC_OK;
    s->syms[ns - 1].next = -1;

    s->heap_len = 0;
    for (int32_t i = 0; i + 1 < ns; i++) push_pair(t, s, i);
    while (s->heap_len) {
        cand c = heap_pop(s);
        sym *l = &s->syms[c.pos];
        if (!l->alive || l->next < 0) continue;
        sym *r = &s->syms[l->next];
        uint32_t rank;
        int32_t merged;
        /* Stale candidate: the pair changed since it was pushed. */
        if (!tok_merge_find(t, l->id, r->id, &rank, &merged) || merged != c.merged) continue;
        l->id = merged;
        r->alive = 0;
        l->next = r->next;
        if (r->next >= 0) s->syms[r->next].prev = (int32_t)c.pos;
        if (l->prev >= 0) push_pair(t, s, l->prev);
        push_pair(t, s, (int32_t)c.pos);
    }

    size_t first = out->len, count = 0;
    for (int32_t i = 0; i >= 0; i = s->syms[i].next) {
        if ((st = lilac_ids_push(out, s->syms[i].id, e))) return st;
        count++;
    }
    if (use_cache && count <= TOK_CACHE_IDS) cache_put(t, h, p, n, out->v + first, count);
    return LILAC_OK;
}

lilac_status lilac_tok_cache_init(lilac_tokenizer *t, lilac_error *e) {
    t->cache = calloc(TOK_CACHE_SLOTS, sizeof *t->cache);
    t->cache_lock = calloc(TOK_CACHE_LOCKS, sizeof *t->cache_lock);
    if (!t->cache || !t->cache_lock) return lilac_fail(e, LILAC_ENOMEM, "tokenizer: cannot allocate the word cache");
    for (int i = 0; i < TOK_CACHE_LOCKS; i++) pthread_mutex_init(&t->cache_lock[i], NULL);
    t->cache_ready = 1;
    return LILAC_OK;
}

void lilac_tok_cache_free(lilac_tokenizer *t) {
    if (t->cache_ready)
        for (int i = 0; i < TOK_CACHE_LOCKS; i++) pthread_mutex_destroy(&t->cache_lock[i]);
    free(t->cache);
    free(t->cache_lock);
    t->cache = NULL;
    t->cache_lock = NULL;
    t->cache_ready = 0;
}
