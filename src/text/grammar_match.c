/* grammar_match.c — the matcher's state: a set of stacks over a node pool,
 * the closure (rule references expanded, stars skipped, finished frames
 * popped), one byte or one added token at a time.  A rule reference that is
 * the last element of its alternative replaces its frame instead of pushing
 * a return frame (a tail call), so right-recursive loops keep stacks flat. */
#include <stdlib.h>
#include <string.h>

#include "text/grammar_impl.h"

#define LG_MAX_DEPTH 4096 /* nested expansions without a byte in between */

int lg_pool_push(lg_pool *p, uint32_t pc, uint32_t sub, int32_t parent) {
    if (p->n == p->cap) {
        size_t c = p->cap ? p->cap * 2 : 256;
        lg_node *v = c <= INT32_MAX ? realloc(p->v, c * sizeof *v) : NULL;
        if (!v) {
            p->oom = 1;
            return -3;
        }
        p->v = v;
        p->cap = c;
    }
    lg_node *n = &p->v[p->n];
    n->pc = pc;
    n->sub = sub;
    n->parent = parent;
    return (int)p->n++;
}

void lg_pool_free(lg_pool *p) {
    free(p->v);
    memset(p, 0, sizeof *p);
}

void lg_set_clear(lg_set *s) {
    s->n = 0;
    s->accept = s->exit = s->over = 0;
}

void lg_set_free(lg_set *s) {
    free(s->top);
    memset(s, 0, sizeof *s);
}

int lg_chain_equal(const lg_pool *p, int32_t a, int32_t b) {
    while (a != b) {
        if (a < 0 || b < 0) return 0;
        const lg_node *x = &p->v[a], *y = &p->v[b];
        if (x->pc != y->pc || x->sub != y->sub) return 0;
        a = x->parent;
        b = y->parent;
    }
    return 1;
}

static void push_top(lg_pool *p, lg_set *s, uint32_t pc, uint32_t sub, int32_t parent) {
    for (int i = 0; i < s->n; i++) {
        const lg_node *t = &p->v[s->top[i]];
        if (t->pc == pc && t->sub == sub && lg_chain_equal(p, t->parent, parent)) return;
    }
    if (s->n >= LG_MAX_TOPS) {
        s->over = 1;
        return;
    }
    if (s->n == s->cap) {
        int c = s->cap ? s->cap * 2 : 16;
        int32_t *t = realloc(s->top, (size_t)c * sizeof *t);
        if (!t) {
            s->over = 1;
            return;
        }
        s->top = t;
        s->cap = c;
    }
    int k = lg_pool_push(p, pc, sub, parent);
    if (k < 0) {
        s->over = 1;
        return;
    }
    s->top[s->n++] = k;
}

static void add_rec(const lg_grammar *g, lg_pool *p, lg_set *s, uint32_t pc, uint32_t sub, int32_t parent, int depth) {
    for (;;) {
        const lg_elem *e = &g->elem[pc];
        switch (e->kind) {
        case LG_END:
            if (parent == LG_BOTTOM) {
                s->accept = 1;
                return;
            }
            if (parent == LG_SCOPE) {
                s->exit = 1;
                return;
            }
            pc = p->v[parent].pc;
            sub = p->v[parent].sub;
            parent = p->v[parent].parent;
            continue;
        case LG_RULE: {
            if (depth > LG_MAX_DEPTH) {
                s->over = 1;
                return;
            }
            int32_t np = parent;
            if (g->elem[pc + 1].kind != LG_END && (np = lg_pool_push(p, pc + 1, 0, parent)) < 0) {
                s->over = 1;
                return;
            }
            const lg_rule_t *r = &g->rule[e->a];
            for (int a = 0; a < r->n; a++) add_rec(g, p, s, r->alt[a], 0, np, depth + 1);
            return;
        }
        case LG_STAR:
            push_top(p, s, pc, sub, parent);
            if (sub != 0) return; /* inside a character: no way out */
            pc++;
            continue;
        default:
            push_top(p, s, pc, sub, parent);
            return;
        }
    }
}

void lg_add(const lg_grammar *g, lg_pool *p, lg_set *s, uint32_t pc, uint32_t sub, int32_t parent) {
    add_rec(g, p, s, pc, sub, parent, 0);
}

/* UTF-8, one byte at a time.  Sub-states: 0 boundary; 1, 2, 3 continuation
 * bytes still needed (any 80..BF); 4 after E0 (A0..BF next), 5 after ED
 * (80..9F: no surrogates), 6 after F0 (90..BF), 7 after F4 (80..8F).
 * Returns the next sub-state (0 with *complete set at a character's end),
 * or -1 for a byte that cannot come here. */
int lg_utf8_next(uint32_t sub, unsigned b, int *complete) {
    *complete = 0;
    switch (sub) {
    case 0:
        if (b < 0x80) return *complete = 1, 0;
        if (b >= 0xC2 && b <= 0xDF) return 1;
        if (b == 0xE0) return 4;
        if (b == 0xED) return 5;
        if (b >= 0xE1 && b <= 0xEF) return 2;
        if (b == 0xF0) return 6;
        if (b >= 0xF1 && b <= 0xF3) return 3;
        if (b == 0xF4) return 7;
        return -1;
    case 1: return b >= 0x80 && b <= 0xBF ? (*complete = 1, 0) : -1;
    case 2: return b >= 0x80 && b <= 0xBF ? 1 : -1;
    case 3: return b >= 0x80 && b <= 0xBF ? 2 : -1;
    case 4: return b >= 0xA0 && b <= 0xBF ? 1 : -1;
    case 5: return b >= 0x80 && b <= 0x9F ? 1 : -1;
    case 6: return b >= 0x90 && b <= 0xBF ? 2 : -1;
    case 7: return b >= 0x80 && b <= 0x8F ? 2 : -1;
    }
    return -1;
}

void lg_step(const lg_grammar *g, lg_pool *p, const lg_set *in, unsigned b, lg_set *out) {
    lg_set_clear(out);
    for (int i = 0; i < in->n; i++) {
        const lg_node n = p->v[in->top[i]]; /* a copy: pushes may move the pool */
        const lg_elem *e = &g->elem[n.pc];
        if (e->kind == LG_BYTES) {
            if (g->lit[e->a + n.sub] != b) continue;
            if (n.sub + 1 < e->n) push_top(p, out, n.pc, n.sub + 1, n.parent);
            else lg_add(g, p, out, n.pc + 1, 0, n.parent);
        } else if (e->kind == LG_CLASS || e->kind == LG_STAR) {
            const lg_class *c = &g->cls[e->a];
            if (n.sub == 0 && (b < 0x80 ? !lg_class_has(c, (int)b) : !c->high)) continue;
            int complete;
            int ns = lg_utf8_next(n.sub, b, &complete);
            if (ns < 0) continue;
            if (!complete) push_top(p, out, n.pc, (uint32_t)ns, n.parent);
            else if (e->kind == LG_CLASS) lg_add(g, p, out, n.pc + 1, 0, n.parent);
            else lg_add(g, p, out, n.pc, 0, n.parent);
        }
        if (in->over) out->over = 1;
    }
}

void lg_step_token(const lg_grammar *g, lg_pool *p, const lg_set *in, int32_t id, lg_set *out) {
    lg_set_clear(out);
    for (int i = 0; i < in->n; i++) {
        const lg_node n = p->v[in->top[i]];
        const lg_elem *e = &g->elem[n.pc];
        if (e->kind == LG_TOKEN && e->a == (uint32_t)id) lg_add(g, p, out, n.pc + 1, 0, n.parent);
    }
}

int lg_copy_state(const lg_pool *from, const lg_set *in, lg_pool *to, lg_set *out, int32_t **remap, size_t *remap_cap) {
    to->n = 0;
    to->oom = 0;
    if (*remap_cap < from->n) {
        int32_t *r = realloc(*remap, (from->n ? from->n : 1) * sizeof *r);
        if (!r) return -1;
        *remap = r;
        *remap_cap = from->n;
    }
    int32_t *rm = *remap;
    for (size_t i = 0; i < from->n; i++) rm[i] = -5;
    lg_set_clear(out);
    out->accept = in->accept;
    out->exit = in->exit;
    if (out->cap < in->n) {
        int32_t *t = realloc(out->top, (size_t)(in->n ? in->n : 1) * sizeof *t);
        if (!t) return -1;
        out->top = t;
        out->cap = in->n;
    }
    for (int i = 0; i < in->n; i++) {
        /* copy the chain bottom-up: find the deepest frame not yet copied */
        int32_t k = in->top[i];
        while (k >= 0 && rm[k] == -5) {
            int32_t q = k;
            while (from->v[q].parent >= 0 && rm[from->v[q].parent] == -5) q = from->v[q].parent;
            int32_t par = from->v[q].parent;
            int nk = lg_pool_push(to, from->v[q].pc, from->v[q].sub, par >= 0 ? rm[par] : par);
            if (nk < 0) return -1;
            rm[q] = nk;
        }
        out->top[out->n++] = k >= 0 ? rm[k] : k;
    }
    return 0;
}

/* ---------------------------------------------------------------- matcher */

static int start(lg_matcher *m) {
    lg_grammar *g = m->g;
    m->pool.n = 0;
    lg_set_clear(&m->cur);
    const lg_rule_t *r = &g->rule[g->root];
    for (int a = 0; a < r->n; a++) lg_add(g, &m->pool, &m->cur, r->alt[a], 0, LG_BOTTOM);
    return m->cur.over || m->pool.oom ? -1 : 0;
}

lilac_status lg_matcher_new(lg_grammar *g, const lg_vocab *v, const int32_t *end_ids, int n_end, lg_matcher **out,
                            lilac_error *e) {
    *out = NULL;
    if (!g->final) return lilac_fail(e, LILAC_EINVAL, "grammar: not finalised");
    lg_matcher *m = calloc(1, sizeof *m);
    if (!m) return lilac_fail(e, LILAC_ENOMEM, "grammar matcher");
    m->g = g;
    m->v = v;
    if (n_end > 0) {
        m->end = malloc((size_t)n_end * sizeof *m->end);
        if (!m->end) {
            free(m);
            return lilac_fail(e, LILAC_ENOMEM, "grammar matcher");
        }
        memcpy(m->end, end_ids, (size_t)n_end * sizeof *m->end);
        m->n_end = n_end;
    }
    if (start(m)) {
        lg_matcher_free(m);
        return lilac_fail(e, LILAC_ENOMEM, "grammar matcher: the start state is too large");
    }
    *out = m;
    return LILAC_OK;
}

void lg_matcher_free(lg_matcher *m) {
    if (!m) return;
    free(m->end);
    lg_pool_free(&m->pool);
    lg_pool_free(&m->tmp);
    lg_set_free(&m->cur);
    lg_set_free(&m->s[0]);
    lg_set_free(&m->s[1]);
    free(m->remap);
    for (int i = 0; i < m->depth_cap; i++) lg_set_free(&m->depth_set[i]);
    free(m->depth_set);
    free(m);
}

/* The state in set (nodes in m->pool) becomes the current one, compacted. */
static int commit(lg_matcher *m, const lg_set *set) {
    lg_set next = {0};
    if (lg_copy_state(&m->pool, set, &m->tmp, &next, &m->remap, &m->remap_cap)) {
        lg_set_free(&next);
        return -1;
    }
    lg_pool t = m->pool;
    m->pool = m->tmp;
    m->tmp = t;
    lg_set_free(&m->cur);
    m->cur = next;
    return 0;
}

int lg_matcher_accept_bytes(lg_matcher *m, const char *p, size_t n) {
    if (m->finished || m->failed || n == 0) return -1;
    size_t mark = m->pool.n;
    const lg_set *in = &m->cur;
    for (size_t k = 0; k < n; k++) {
        lg_set *out = &m->s[k & 1];
        lg_step(m->g, &m->pool, in, (unsigned char)p[k], out);
        in = out;
        if (out->over) m->failed = 1;
        if ((out->n == 0 && !out->accept) || out->over) {
            m->pool.n = mark;
            return -1;
        }
    }
    if (commit(m, in)) {
        m->failed = 1;
        return -1;
    }
    return 0;
}

int lg_matcher_accept(lg_matcher *m, int32_t id) {
    if (m->finished || m->failed || id < 0) return -1;
    for (int k = 0; k < m->n_end; k++)
        if (m->end[k] == id) {
            if (!m->cur.accept) return -1;
            m->finished = 1;
            return 0;
        }
    const lg_vocab *v = m->v;
    if (!v || id >= v->V) return -1;
    if (v->added[id]) {
        size_t mark = m->pool.n;
        lg_step_token(m->g, &m->pool, &m->cur, id, &m->s[0]);
        if ((m->s[0].n == 0 && !m->s[0].accept) || m->s[0].over || commit(m, &m->s[0])) {
            m->pool.n = mark;
            return -1;
        }
        return 0;
    }
    if (v->len[id] == 0) return -1;
    return lg_matcher_accept_bytes(m, (const char *)v->bytes + v->off[id], v->len[id]);
}

int lg_matcher_can_end(const lg_matcher *m) { return !m->finished && m->cur.accept; }
int lg_matcher_finished(const lg_matcher *m) { return m->finished || (m->cur.n == 0 && m->cur.accept); }

void lg_cache_stats(const lg_grammar *g, int *positions, size_t *bytes) { *bytes = lg_cache_bytes(g->cache, positions); }

int lg_match_text(lg_grammar *g, const char *text, size_t n) {
    lg_matcher *m = NULL;
    if (lg_matcher_new(g, NULL, NULL, 0, &m, NULL)) return 0;
    int ok = (n == 0 || lg_matcher_accept_bytes(m, text, n) == 0) && m->cur.accept;
    lg_matcher_free(m);
    return ok;
}
