/* grammar_mask.c — the allowed-token mask of a matcher state (the method is
 * in grammar.h).
 *
 * Classifying a position: a walk of the vocabulary trie from a state made of
 * the position's frames alone, over a base that stands for the unknown
 * stack below (LG_SCOPE), or the grammar's end (LG_BOTTOM) when the frames
 * reach it.  The walk's states are interned and their transitions memoised,
 * so a trie node costs a table lookup: the free text of a JSON string (a
 * handful of states) is classified over all 248K tokens in a few ms, once
 * per grammar.  Per token: accepted (the walk is alive, or the frames end
 * exactly, at its last byte), or uncertain at each depth where the frames
 * ended with bytes left (kept as (id, depth), sorted by the bytes left and
 * grouped by the first of them), else rejected.
 *
 * Per step: the accepted sets of the stacks' positions, plus each uncertain
 * list walked from the state below that position's frames (the stack's own
 * continuation) with the same pruning: a dead first byte drops its group, a
 * dead prefix drops the entries that share it.  A position whose uncertain
 * list is long is keyed again with one more frame (up to LG_KEY_FRAMES),
 * which settles most of it inside the walk. */
#include <stdlib.h>
#include <string.h>

#include "text/grammar_impl.h"

#define LG_KEY_FRAMES 3    /* frames in a position's key, at most */
#define LG_DEEPEN 12000    /* uncertain entries above which a position is keyed deeper */
#define LG_MAX_WALK_STATES 65536 /* about 85 MB of transition tables at most */

typedef struct {
    int32_t id;
    uint16_t off; /* bytes of the token consumed inside the frames */
    uint16_t lcp; /* bytes left in common with the previous entry's */
} lg_unc;

typedef struct {
    uint32_t key[2 * LG_KEY_FRAMES + 2]; /* frames (pc, sub)..., count, base */
    int deeper;                          /* look up with one more frame */
    int n_acc;
    int32_t *acc;   /* sparse accepted ids (n_acc <= vocab / 32) */
    uint32_t *bits; /* else a bitmask */
    int n_unc;
    lg_unc *unc;
    uint32_t grp[257]; /* entries whose left bytes start with b: unc[grp[b] .. grp[b + 1]) */
} lg_entry;

struct lg_cache {
    lg_entry *e;
    int n, cap;
    int32_t *tab; /* open addressing: entry index or -1 */
    uint32_t mask;
    size_t bytes;
};

static uint32_t hash_words(const uint32_t *w, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ w[i]) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 31;
    }
    return (uint32_t)(h ^ (h >> 32));
}

void lg_cache_free(lg_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) {
        free(c->e[i].acc);
        free(c->e[i].bits);
        free(c->e[i].unc);
    }
    free(c->e);
    free(c->tab);
    free(c);
}

size_t lg_cache_bytes(const lg_cache *c, int *positions) {
    if (positions) *positions = c ? c->n : 0;
    return c ? c->bytes : 0;
}

/* ------------------------------------------------------------ walk states */

/* Interned states of one classification walk: each a sorted list of chains
 * (a chain: frame count, then (pc, sub) per frame from the top down to the
 * base), with memoised transitions. */
typedef struct {
    uint32_t off, len, hash;
    int32_t *next;  /* [256] -1 = not computed yet */
    uint8_t *flags; /* [256] bit 1: the frames ended (exit), bit 2: the grammar ended (accept) */
} wstate;

typedef struct {
    const lg_grammar *g;
    int32_t base; /* LG_SCOPE or LG_BOTTOM */
    uint32_t *w;
    size_t nw, capw;
    wstate *s;
    int n, cap;
    int32_t *tab;
    uint32_t mask;
    lg_pool pool;
    lg_set a, b;
    uint32_t *chain; /* scratch */
    size_t chain_cap;
    int oom;
} walk;

static int w_grow(walk *k, size_t need) {
    if (need <= k->capw) return 0;
    size_t c = k->capw ? k->capw : 1024;
    while (c < need) c *= 2;
    uint32_t *p = realloc(k->w, c * sizeof *p);
    if (!p) return -1;
    k->w = p;
    k->capw = c;
    return 0;
}

static int tab_grow(walk *k) {
    uint32_t cap = k->mask ? (k->mask + 1) * 2 : 1024;
    int32_t *t = malloc(cap * sizeof *t);
    if (!t) return -1;
    for (uint32_t i = 0; i < cap; i++) t[i] = -1;
    for (int i = 0; i < k->n; i++) {
        uint32_t j = k->s[i].hash & (cap - 1);
        while (t[j] >= 0) j = (j + 1) & (cap - 1);
        t[j] = i;
    }
    free(k->tab);
    k->tab = t;
    k->mask = cap - 1;
    return 0;
}

/* The id of the state whose words are w[from .. from + len) (just appended
 * at the end of k->w); drops them again when the state exists. */
static int intern(walk *k, size_t from, size_t len) {
    uint32_t h = hash_words(k->w + from, len);
    if ((size_t)(k->n + 1) * 2 > (size_t)k->mask + 1 && tab_grow(k)) return -1;
    uint32_t j = h & k->mask;
    for (; k->tab[j] >= 0; j = (j + 1) & k->mask) {
        const wstate *s = &k->s[k->tab[j]];
        if (s->hash == h && s->len == len && !memcmp(k->w + s->off, k->w + from, len * sizeof *k->w)) {
            k->nw = from;
            return k->tab[j];
        }
    }
    if (k->n >= LG_MAX_WALK_STATES) return -1;
    if (k->n == k->cap) {
        int c = k->cap ? k->cap * 2 : 64;
        wstate *p = realloc(k->s, (size_t)c * sizeof *p);
        if (!p) return -1;
        k->s = p;
        k->cap = c;
    }
    wstate *s = &k->s[k->n];
    s->off = (uint32_t)from;
    s->len = (uint32_t)len;
    s->hash = h;
    s->next = NULL;
    s->flags = NULL;
    k->tab[j] = k->n;
    return k->n++;
}

typedef struct {
    const uint32_t *w;
    uint32_t len;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    for (uint32_t i = 0; i < n; i++)
        if (x->w[i] != y->w[i]) return x->w[i] < y->w[i] ? -1 : 1;
    return x->len < y->len ? -1 : x->len > y->len;
}

/* Interns the state of set (nodes in k->pool). */
static int intern_set(walk *k, const lg_set *set) {
    /* chains into a scratch area, then sorted into k->w */
    size_t total = 0;
    for (int i = 0; i < set->n; i++) {
        total++;
        for (int32_t q = set->top[i]; q >= 0; q = k->pool.v[q].parent) total += 2;
    }
    if (total > k->chain_cap) {
        uint32_t *c = realloc(k->chain, total * sizeof *c);
        if (!c) return -1;
        k->chain = c;
        k->chain_cap = total;
    }
    span *sp = malloc((size_t)(set->n ? set->n : 1) * sizeof *sp);
    if (!sp) return -1;
    size_t at = 0;
    for (int i = 0; i < set->n; i++) {
        size_t start = at++;
        for (int32_t q = set->top[i]; q >= 0; q = k->pool.v[q].parent) {
            k->chain[at++] = k->pool.v[q].pc;
            k->chain[at++] = k->pool.v[q].sub;
        }
        k->chain[start] = (uint32_t)((at - start - 1) / 2);
        sp[i].w = k->chain + start;
        sp[i].len = (uint32_t)(at - start);
    }
    qsort(sp, (size_t)set->n, sizeof *sp, cmp_span);
    size_t from = k->nw;
    if (w_grow(k, from + total)) {
        free(sp);
        return -1;
    }
    for (int i = 0; i < set->n; i++) {
        memcpy(k->w + k->nw, sp[i].w, sp[i].len * sizeof *k->w);
        k->nw += sp[i].len;
    }
    free(sp);
    return intern(k, from, total);
}

/* Rebuilds state id as nodes of k->pool (emptied first) into set. */
static int materialize(walk *k, int id, lg_set *set) {
    k->pool.n = 0;
    lg_set_clear(set);
    const uint32_t *w = k->w + k->s[id].off, *end = w + k->s[id].len;
    while (w < end) {
        uint32_t nf = *w++;
        int32_t parent = k->base;
        for (uint32_t f = nf; f-- > 0;) parent = lg_pool_push(&k->pool, w[2 * f], w[2 * f + 1], parent);
        w += 2 * nf;
        if (parent < 0 && nf) return -1;
        if (set->n == set->cap) {
            int c = set->cap ? set->cap * 2 : 16;
            int32_t *t = realloc(set->top, (size_t)c * sizeof *t);
            if (!t) return -1;
            set->top = t;
            set->cap = c;
        }
        set->top[set->n++] = parent;
    }
    return k->pool.oom ? -1 : 0;
}

/* The transition of state id on byte b: the next state (-2: dead), and its
 * flags; -1 on failure. */
static int transition(walk *k, int id, unsigned b, uint8_t *flags) {
    wstate *s = &k->s[id];
    if (!s->next) {
        s->next = malloc(256 * sizeof *s->next);
        s->flags = malloc(256);
        if (!s->next || !s->flags) return -1;
        for (int i = 0; i < 256; i++) s->next[i] = -1;
    }
    if (s->next[b] != -1) {
        *flags = s->flags[b];
        return s->next[b];
    }
    if (materialize(k, id, &k->a)) return -1;
    lg_step(k->g, &k->pool, &k->a, b, &k->b);
    if (k->b.over) return -1;
    uint8_t f = (uint8_t)((k->b.exit ? 1 : 0) | (k->b.accept ? 2 : 0));
    int nx = k->b.n ? intern_set(k, &k->b) : -2;
    if (nx == -1) return -1;
    s = &k->s[id]; /* intern may have moved the array */
    s->next[b] = nx;
    s->flags[b] = f;
    *flags = f;
    return nx;
}

static void walk_free(walk *k) {
    for (int i = 0; i < k->n; i++) {
        free(k->s[i].next);
        free(k->s[i].flags);
    }
    free(k->s);
    free(k->w);
    free(k->tab);
    free(k->chain);
    lg_pool_free(&k->pool);
    lg_set_free(&k->a);
    lg_set_free(&k->b);
}

/* ------------------------------------------------------ classification */

typedef struct {
    int32_t *v;
    int n, cap;
} idlist;

static int ids_push(idlist *l, int32_t x) {
    if (l->n == l->cap) {
        int c = l->cap ? l->cap * 2 : 256;
        int32_t *p = realloc(l->v, (size_t)c * sizeof *p);
        if (!p) return -1;
        l->v = p;
        l->cap = c;
    }
    l->v[l->n++] = x;
    return 0;
}

typedef struct {
    lg_unc *v;
    int n, cap;
} unclist;

static int unc_push(unclist *l, int32_t id, int off) {
    if (l->n == l->cap) {
        int c = l->cap ? l->cap * 2 : 256;
        lg_unc *p = realloc(l->v, (size_t)c * sizeof *p);
        if (!p) return -1;
        l->v = p;
        l->cap = c;
    }
    l->v[l->n].id = id;
    l->v[l->n].off = (uint16_t)off;
    l->v[l->n].lcp = 0;
    l->n++;
    return 0;
}

static int cmp_unc(const void *a, const void *b, void *ctx) {
    const lg_vocab *v = ctx;
    const lg_unc *x = a, *y = b;
    size_t lx = v->len[x->id] - x->off, ly = v->len[y->id] - y->off, n = lx < ly ? lx : ly;
    int c = memcmp(v->bytes + v->off[x->id] + x->off, v->bytes + v->off[y->id] + y->off, n);
    if (c) return c;
    return lx < ly ? -1 : lx > ly ? 1 : x->id - y->id;
}

/* Classifies every token from the frames in key (see the top of the file). */
static int classify(const lg_grammar *g, const lg_vocab *v, const uint32_t *key, lg_entry *out) {
    walk k = {0};
    k.g = g;
    uint32_t nf = key[2 * LG_KEY_FRAMES];
    k.base = (int32_t)key[2 * LG_KEY_FRAMES + 1];
    idlist acc = {0};
    unclist unc = {0};
    int32_t *st = malloc(((size_t)v->max_len + 2) * sizeof *st);
    uint16_t *ex = malloc(((size_t)v->max_len + 2) * sizeof *ex);
    int rc = -1;
    if (!st || !ex) goto out;
    /* the start state: the key's frames, materialised once and interned */
    {
        int32_t parent = k.base;
        for (uint32_t f = nf; f-- > 0;) parent = lg_pool_push(&k.pool, key[2 * f], key[2 * f + 1], parent);
        if (parent < 0) goto out;
        lg_set s0 = {0};
        int32_t top = parent;
        s0.top = &top;
        s0.n = s0.cap = 1;
        st[0] = intern_set(&k, &s0);
        if (st[0] < 0) goto out;
    }
    int n_ex = 0;
    for (size_t i = 0; i < v->n;) {
        int d = v->depth[i];
        while (n_ex > 0 && ex[n_ex - 1] >= d) n_ex--;
        uint8_t fl = 0;
        int t = st[d - 1] >= 0 ? transition(&k, st[d - 1], v->byte[i], &fl) : -2;
        if (t == -1) goto out;
        st[d] = t;
        if (fl & 1) ex[n_ex++] = (uint16_t)d;
        int32_t id = v->tok[i];
        if (id >= 0) {
            if (t >= 0 || (fl & 3)) {
                if (ids_push(&acc, id)) goto out;
            } else {
                for (int x = 0; x < n_ex; x++)
                    if (ex[x] < d && unc_push(&unc, id, ex[x])) goto out;
            }
        }
        if (t < 0) {
            if (n_ex > 0)
                for (size_t j = i + 1; j < v->skip[i]; j++)
                    if (v->tok[j] >= 0)
                        for (int x = 0; x < n_ex; x++)
                            if (unc_push(&unc, v->tok[j], ex[x])) goto out;
            i = v->skip[i];
            continue;
        }
        i++;
    }
    memset(out, 0, sizeof *out);
    memcpy(out->key, key, sizeof out->key);
    if (unc.n > LG_DEEPEN && nf < LG_KEY_FRAMES && k.base == LG_SCOPE) {
        out->deeper = 1;
        rc = 0;
        goto out;
    }
    out->n_acc = acc.n;
    if (acc.n > v->words) {
        out->bits = calloc((size_t)v->words, sizeof *out->bits);
        if (!out->bits) goto out;
        for (int i = 0; i < acc.n; i++) out->bits[acc.v[i] >> 5] |= 1u << (acc.v[i] & 31);
    } else if (acc.n) {
        out->acc = acc.v;
        acc.v = NULL;
    }
    if (unc.n) {
        qsort_r(unc.v, (size_t)unc.n, sizeof *unc.v, cmp_unc, (void *)v);
        int b = -1;
        for (int i = 0; i < unc.n; i++) {
            const unsigned char *s = v->bytes + v->off[unc.v[i].id] + unc.v[i].off;
            size_t ls = v->len[unc.v[i].id] - unc.v[i].off, l = 0;
            while (b < s[0]) out->grp[++b] = (uint32_t)i;
            if (i > 0) {
                const unsigned char *p = v->bytes + v->off[unc.v[i - 1].id] + unc.v[i - 1].off;
                size_t lp = v->len[unc.v[i - 1].id] - unc.v[i - 1].off;
                while (l < ls && l < lp && s[l] == p[l]) l++;
            }
            unc.v[i].lcp = (uint16_t)l;
        }
        while (b < 256) out->grp[++b] = (uint32_t)unc.n;
        out->unc = unc.v;
        out->n_unc = unc.n;
        unc.v = NULL;
    }
    rc = 0;
out:
    free(st);
    free(ex);
    free(acc.v);
    free(unc.v);
    walk_free(&k);
    return rc;
}

/* --------------------------------------------------------------- the cache */

static lg_entry *cache_get(lg_grammar *g, const lg_vocab *v, const uint32_t *key) {
    if (!g->cache && !(g->cache = calloc(1, sizeof *g->cache))) return NULL;
    lg_cache *c = g->cache;
    const size_t kw = 2 * LG_KEY_FRAMES + 2;
    uint32_t h = hash_words(key, kw);
    if ((size_t)(c->n + 1) * 2 > (size_t)c->mask + 1 || !c->tab) {
        uint32_t cap = c->tab ? (c->mask + 1) * 2 : 256;
        int32_t *t = malloc(cap * sizeof *t);
        if (!t) return NULL;
        for (uint32_t i = 0; i < cap; i++) t[i] = -1;
        for (int i = 0; i < c->n; i++) {
            uint32_t j = hash_words(c->e[i].key, kw) & (cap - 1);
            while (t[j] >= 0) j = (j + 1) & (cap - 1);
            t[j] = i;
        }
        free(c->tab);
        c->tab = t;
        c->mask = cap - 1;
    }
    uint32_t j = h & c->mask;
    for (; c->tab[j] >= 0; j = (j + 1) & c->mask)
        if (!memcmp(c->e[c->tab[j]].key, key, kw * sizeof *key)) return &c->e[c->tab[j]];
    if (c->n == c->cap) {
        int nc = c->cap ? c->cap * 2 : 64;
        lg_entry *p = realloc(c->e, (size_t)nc * sizeof *p);
        if (!p) return NULL;
        c->e = p;
        c->cap = nc;
    }
    lg_entry *e = &c->e[c->n];
    if (classify(g, v, key, e)) return NULL;
    c->bytes += sizeof *e + (size_t)e->n_unc * sizeof *e->unc +
                (e->bits ? (size_t)v->words * 4 : (size_t)e->n_acc * sizeof *e->acc);
    c->tab[j] = c->n++;
    return e;
}

/* The key of the top stack frames (nf of them, fewer at the grammar's
 * bottom); *below receives the node under them (or the base marker). */
static void make_key(const lg_pool *p, int32_t top, int nf, uint32_t *key, int32_t *below) {
    memset(key, 0, (2 * LG_KEY_FRAMES + 2) * sizeof *key);
    int f = 0;
    int32_t q = top;
    while (f < nf && q >= 0) {
        key[2 * f] = p->v[q].pc;
        key[2 * f + 1] = p->v[q].sub;
        q = p->v[q].parent;
        f++;
    }
    key[2 * LG_KEY_FRAMES] = (uint32_t)f;
    key[2 * LG_KEY_FRAMES + 1] = (uint32_t)(q < 0 ? LG_BOTTOM : LG_SCOPE);
    *below = q;
}

/* ------------------------------------------------------------- the mask */

static lg_set *dset(lg_matcher *m, int d) {
    if (d >= m->depth_cap) {
        int c = m->v->max_len + 2;
        if (d >= c) return NULL;
        lg_set *p = realloc(m->depth_set, (size_t)c * sizeof *p);
        if (!p) return NULL;
        memset(p + m->depth_cap, 0, (size_t)(c - m->depth_cap) * sizeof *p);
        m->depth_set = p;
        m->depth_cap = c;
    }
    return &m->depth_set[d];
}

/* Marks the uncertain entries of e whose bytes left pass from the stack
 * continuing at node `below`. */
static int walk_uncertain(lg_matcher *m, const lg_entry *e, int32_t below, uint32_t *bits) {
    const lg_vocab *v = m->v;
    lg_pool *p = &m->pool;
    lg_set *s0 = dset(m, 0);
    if (!s0) return -1;
    lg_set_clear(s0);
    const lg_node bn = p->v[below];
    lg_add(m->g, p, s0, bn.pc, bn.sub, bn.parent);
    if (s0->over) return -1;
    if (s0->n == 0) return 0; /* only the end may follow */
    for (int b = 0; b < 256; b++) {
        uint32_t lo = e->grp[b], hi = e->grp[b + 1];
        if (lo == hi) continue;
        lg_set *s1 = dset(m, 1);
        if (!s1) return -1;
        lg_step(m->g, p, s0, (unsigned)b, s1);
        if (s1->over) return -1;
        if (s1->n == 0 && !s1->accept) continue;
        int have = 1;    /* depths 1..have hold the states of the current path */
        int dead_at = 0; /* > 0: the state after that many bytes is dead */
        for (uint32_t i = lo; i < hi; i++) {
            const lg_unc *u = &e->unc[i];
            const unsigned char *s = v->bytes + v->off[u->id] + u->off;
            int L = v->len[u->id] - u->off;
            int lcp = i == lo ? 1 : u->lcp;
            if (dead_at && lcp >= dead_at) continue; /* shares the dead prefix */
            dead_at = 0;
            if (have > lcp) have = lcp;
            for (; have < L; have++) {
                lg_set *a = dset(m, have), *nx = dset(m, have + 1);
                if (!a || !nx) return -1;
                lg_step(m->g, p, a, s[have], nx);
                if (nx->over) return -1;
                if (nx->n == 0 && !(nx->accept && have + 1 == L)) {
                    dead_at = have + 1;
                    break;
                }
            }
            if (dead_at) continue;
            const lg_set *fin = dset(m, L);
            if (fin->n > 0 || fin->accept) bits[u->id >> 5] |= 1u << (u->id & 31);
        }
    }
    return 0;
}

int lg_matcher_mask(lg_matcher *m, uint32_t *bits, lilac_error *e) {
    const lg_vocab *v = m->v;
    memset(bits, 0, (size_t)v->words * sizeof *bits);
    if (m->failed) return lilac_fail(e, LILAC_EINVAL, "grammar: the matcher state overflowed"), -1;
    if (m->finished) return 0;
    const size_t mark = m->pool.n;
    int rc = 0;
    for (int i = 0; i < m->cur.n && !rc; i++) {
        int32_t top = m->cur.top[i];
        const lg_elem *el = &m->g->elem[m->pool.v[top].pc];
        if (el->kind == LG_TOKEN) {
            if ((int)el->a < v->V) bits[el->a >> 5] |= 1u << (el->a & 31);
            continue;
        }
        uint32_t key[2 * LG_KEY_FRAMES + 2];
        int32_t below;
        lg_entry *en = NULL;
        for (int nf = 1; nf <= LG_KEY_FRAMES; nf++) {
            make_key(&m->pool, top, nf, key, &below);
            if (!(en = cache_get(m->g, v, key))) break;
            if (!en->deeper) break;
        }
        if (!en) {
            rc = -1;
            lilac_fail(e, LILAC_ENOMEM, "grammar: out of memory classifying tokens");
            break;
        }
        if (en->bits)
            for (int w = 0; w < v->words; w++) bits[w] |= en->bits[w];
        else
            for (int k = 0; k < en->n_acc; k++) bits[en->acc[k] >> 5] |= 1u << (en->acc[k] & 31);
        if (en->n_unc && below >= 0 && walk_uncertain(m, en, below, bits)) {
            rc = -1;
            lilac_fail(e, LILAC_ENOMEM, "grammar: out of memory checking tokens");
        }
    }
    m->pool.n = mark;
    if (rc) return -1;
    if (m->cur.accept)
        for (int k = 0; k < m->n_end; k++)
            if (m->end[k] >= 0 && m->end[k] < v->V) bits[m->end[k] >> 5] |= 1u << (m->end[k] & 31);
    int n = 0;
    for (int w = 0; w < v->words; w++) n += __builtin_popcount(bits[w]);
    return n;
}
