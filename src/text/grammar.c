/* grammar.c — building and finalising grammars (see grammar.h).  Elements of
 * all alternatives live in one array, each alternative ending with LG_END,
 * so "the next element" is pc + 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/grammar_impl.h"
#include "util/buf.h"

#define LG_MAX_ELEMS (4u << 20) /* a bound on hostile schemas */

static int grow(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * size);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

lg_grammar *lg_new(void) {
    lg_grammar *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->root = -1;
    for (int i = 0; i < LG_SH_N; i++) g->shared[i] = -1;
    for (int i = 0; i <= LG_ANY_DEPTH; i++) g->any[i] = g->any_obj[i] = -1;
    return g;
}

void lg_free(lg_grammar *g) {
    if (!g) return;
    lg_cache_free(g->cache);
    for (int i = 0; i < g->n_rule; i++) free(g->rule[i].alt);
    free(g->rule);
    free(g->elem);
    free(g->lit);
    free(g->cls);
    free(g);
}

int lg_rule(lg_grammar *g, const char *name) {
    size_t cap = (size_t)g->cap_rule;
    if (g->final || grow((void **)&g->rule, &cap, (size_t)g->n_rule + 1, sizeof *g->rule)) {
        g->oom = 1;
        return -1;
    }
    g->cap_rule = (int)cap;
    lg_rule_t *r = &g->rule[g->n_rule];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name ? name : "r");
    return g->n_rule++;
}

static void seq_push(lg_grammar *g, lg_seq *s, lg_elem e) {
    size_t cap = (size_t)s->cap;
    if (grow((void **)&s->v, &cap, (size_t)s->n + 1, sizeof *s->v)) {
        g->oom = 1;
        return;
    }
    s->cap = (int)cap;
    s->v[s->n++] = e;
}

void lg_seq_bytes(lg_grammar *g, lg_seq *s, const char *p, size_t n) {
    if (n == 0) return;
    if (n > UINT32_MAX / 2 || grow((void **)&g->lit, &g->cap_lit, g->n_lit + n, 1)) {
        g->oom = 1;
        return;
    }
    memcpy(g->lit + g->n_lit, p, n);
    lg_elem *last = s->n ? &s->v[s->n - 1] : NULL;
    if (last && last->kind == LG_BYTES && last->a + last->n == g->n_lit) {
        last->n += (uint32_t)n; /* contiguous in the pool: one literal */
    } else {
        lg_elem e = {LG_BYTES, (uint32_t)g->n_lit, (uint32_t)n};
        seq_push(g, s, e);
    }
    g->n_lit += n;
}

void lg_seq_str(lg_grammar *g, lg_seq *s, const char *p) { lg_seq_bytes(g, s, p, strlen(p)); }

void lg_seq_class(lg_grammar *g, lg_seq *s, const lg_class *c, int star) {
    int k;
    for (k = 0; k < g->n_cls; k++)
        if (lg_class_eq(&g->cls[k], c)) break;
    if (k == g->n_cls) {
        size_t cap = (size_t)g->cap_cls;
        if (grow((void **)&g->cls, &cap, (size_t)g->n_cls + 1, sizeof *g->cls)) {
            g->oom = 1;
            return;
        }
        g->cap_cls = (int)cap;
        memset(&g->cls[k], 0, sizeof g->cls[k]);
        memcpy(g->cls[k].ascii, c->ascii, sizeof c->ascii);
        g->cls[k].high = c->high;
        g->n_cls++;
    }
    lg_elem e = {(uint8_t)(star ? LG_STAR : LG_CLASS), (uint32_t)k, 0};
    seq_push(g, s, e);
}

void lg_seq_rule(lg_grammar *g, lg_seq *s, int rule) {
    if (rule < 0) {
        g->oom = 1; /* a failed lg_rule: the grammar is unusable */
        return;
    }
    lg_elem e = {LG_RULE, (uint32_t)rule, 0};
    seq_push(g, s, e);
}

void lg_seq_token(lg_grammar *g, lg_seq *s, int32_t id) {
    lg_elem e = {LG_TOKEN, (uint32_t)id, 0};
    seq_push(g, s, e);
}

void lg_alt(lg_grammar *g, int rule, lg_seq *s) {
    if (rule < 0 || rule >= g->n_rule || g->final || g->n_elem + (size_t)s->n + 1 > LG_MAX_ELEMS ||
        grow((void **)&g->elem, &g->cap_elem, g->n_elem + (size_t)s->n + 1, sizeof *g->elem)) {
        g->oom = 1;
        s->n = 0;
        return;
    }
    lg_rule_t *r = &g->rule[rule];
    size_t cap = (size_t)r->cap;
    if (grow((void **)&r->alt, &cap, (size_t)r->n + 1, sizeof *r->alt)) {
        g->oom = 1;
        s->n = 0;
        return;
    }
    r->cap = (int)cap;
    r->alt[r->n++] = (uint32_t)g->n_elem;
    if (s->n) memcpy(g->elem + g->n_elem, s->v, (size_t)s->n * sizeof *s->v);
    g->n_elem += (size_t)s->n;
    lg_elem end = {LG_END, 0, 0};
    g->elem[g->n_elem++] = end;
    s->n = 0;
}

void lg_seq_append(lg_grammar *g, lg_seq *s, const lg_seq *from) {
    for (int i = 0; i < from->n; i++) seq_push(g, s, from->v[i]);
}

void lg_seq_free(lg_seq *s) {
    free(s->v);
    memset(s, 0, sizeof *s);
}

void lg_alt_str(lg_grammar *g, int rule, const char *p) {
    lg_seq s = {0};
    lg_seq_str(g, &s, p);
    lg_alt(g, rule, &s);
    lg_seq_free(&s);
}

void lg_alt_rule(lg_grammar *g, int rule, int ref) {
    lg_seq s = {0};
    lg_seq_rule(g, &s, ref);
    lg_alt(g, rule, &s);
    lg_seq_free(&s);
}

void lg_alt_empty(lg_grammar *g, int rule) {
    lg_seq s = {0};
    lg_alt(g, rule, &s);
}

void lg_class_clear(lg_class *c) { memset(c, 0, sizeof *c); }

void lg_class_add(lg_class *c, int lo, int hi) {
    for (int b = lo < 0 ? 0 : lo; b <= hi && b < 128; b++) c->ascii[b >> 5] |= 1u << (b & 31);
}

void lg_class_del(lg_class *c, int lo, int hi) {
    for (int b = lo < 0 ? 0 : lo; b <= hi && b < 128; b++) c->ascii[b >> 5] &= ~(1u << (b & 31));
}

int lg_class_eq(const lg_class *a, const lg_class *b) {
    return !memcmp(a->ascii, b->ascii, sizeof a->ascii) && a->high == b->high; /* field by field: padding */
}

int lg_class_has(const lg_class *c, int b) { return b >= 0 && b < 128 && (c->ascii[b >> 5] >> (b & 31) & 1); }

/* ------------------------------------------------------------- finalising */

/* Which rules can derive a finite string (fixed point). */
static void productive(const lg_grammar *g, uint8_t *prod) {
    memset(prod, 0, (size_t)g->n_rule);
    for (int changed = 1; changed;) {
        changed = 0;
        for (int r = 0; r < g->n_rule; r++) {
            if (prod[r]) continue;
            for (int a = 0; a < g->rule[r].n && !prod[r]; a++) {
                int ok = 1;
                for (uint32_t pc = g->rule[r].alt[a]; g->elem[pc].kind != LG_END && ok; pc++)
                    if (g->elem[pc].kind == LG_RULE && !prod[g->elem[pc].a]) ok = 0;
                if (ok) prod[r] = 1, changed = 1;
            }
        }
    }
}

static void nullable(const lg_grammar *g, uint8_t *nul) {
    memset(nul, 0, (size_t)g->n_rule);
    for (int changed = 1; changed;) {
        changed = 0;
        for (int r = 0; r < g->n_rule; r++) {
            if (nul[r]) continue;
            for (int a = 0; a < g->rule[r].n && !nul[r]; a++) {
                int ok = 1;
                for (uint32_t pc = g->rule[r].alt[a]; g->elem[pc].kind != LG_END && ok; pc++) {
                    const lg_elem *e = &g->elem[pc];
                    if (!(e->kind == LG_STAR || (e->kind == LG_RULE && nul[e->a]))) ok = 0;
                }
                if (ok) nul[r] = 1, changed = 1;
            }
        }
    }
}

/* A rule reachable from itself through rule references that are preceded
 * only by nullable elements would make the closure loop: find one (DFS with
 * colours, iterative).  Returns the rule, or -1. */
static int left_recursive(const lg_grammar *g, const uint8_t *nul) {
    int n = g->n_rule;
    uint8_t *colour = calloc((size_t)n, 1);
    int *stack = malloc((size_t)n * 2 * sizeof *stack); /* (rule, next alternative/element cursor) */
    uint32_t *cur = malloc((size_t)n * sizeof *cur);
    int found = -1;
    if (!colour || !stack || !cur) {
        found = -2;
        goto out;
    }
    for (int r0 = 0; r0 < n && found < 0; r0++) {
        if (colour[r0]) continue;
        int sp = 0;
        stack[sp++] = r0;
        colour[r0] = 1;
        cur[r0] = 0; /* index over (alternative, element) pairs, flattened below */
        while (sp > 0 && found < 0) {
            int r = stack[sp - 1];
            /* find the next left-position reference of r after cursor */
            int next = -1;
            while (next < 0) {
                uint32_t k = cur[r]++;
                int a = (int)(k >> 16), idx = (int)(k & 0xffff);
                if (a >= g->rule[r].n) break;
                uint32_t pc = g->rule[r].alt[a] + (uint32_t)idx;
                const lg_elem *e = &g->elem[pc];
                if (e->kind == LG_END || idx >= 0xffff) {
                    cur[r] = (uint32_t)(a + 1) << 16;
                    continue;
                }
                if (e->kind == LG_RULE) next = (int)e->a;
                /* stop scanning this alternative at the first element that must consume */
                if (!(e->kind == LG_STAR || (e->kind == LG_RULE && nul[e->a]))) cur[r] = (uint32_t)(a + 1) << 16;
            }
            if (next < 0) {
                colour[r] = 2;
                sp--;
            } else if (colour[next] == 1) {
                found = next;
            } else if (colour[next] == 0) {
                colour[next] = 1;
                cur[next] = 0;
                stack[sp++] = next;
            }
        }
    }
out:
    free(colour);
    free(stack);
    free(cur);
    return found;
}

lilac_status lg_finalize(lg_grammar *g, int root, lilac_error *e) {
    if (g->oom) return lilac_fail(e, LILAC_ENOMEM, "grammar: out of memory (or over %u elements)", LG_MAX_ELEMS);
    if (root < 0 || root >= g->n_rule) return lilac_fail(e, LILAC_EINVAL, "grammar: no root rule");
    uint8_t *flag = malloc((size_t)g->n_rule + 1);
    if (!flag) return lilac_fail(e, LILAC_ENOMEM, "grammar: out of memory");
    productive(g, flag);
    if (!flag[root]) {
        free(flag);
        return lilac_fail(e, LILAC_EINVAL, "the schema admits no finite value");
    }
    /* drop alternatives that can never finish, so every state can complete */
    for (int r = 0; r < g->n_rule; r++) {
        int k = 0;
        for (int a = 0; a < g->rule[r].n; a++) {
            int ok = 1;
            for (uint32_t pc = g->rule[r].alt[a]; g->elem[pc].kind != LG_END && ok; pc++)
                if (g->elem[pc].kind == LG_RULE && !flag[g->elem[pc].a]) ok = 0;
            if (ok) g->rule[r].alt[k++] = g->rule[r].alt[a];
        }
        g->rule[r].n = k;
    }
    nullable(g, flag);
    int lr = left_recursive(g, flag);
    free(flag);
    if (lr == -2) return lilac_fail(e, LILAC_ENOMEM, "grammar: out of memory");
    if (lr >= 0)
        return lilac_fail(e, LILAC_EINVAL, "the schema refers to itself (%s) before any text is written", g->rule[lr].name);
    g->root = root;
    g->final = 1;
    return LILAC_OK;
}

size_t lg_size(const lg_grammar *g, int *rules) {
    if (rules) *rules = g->n_rule;
    return g->n_elem;
}

static void dump_class(lilac_buf *b, const lg_class *c) {
    lilac_buf_printf(b, "[");
    for (int lo = 0; lo < 128; lo++) {
        if (!lg_class_has(c, lo)) continue;
        int hi = lo;
        while (hi + 1 < 128 && lg_class_has(c, hi + 1)) hi++;
        for (int k = 0; k < 2; k++) {
            int ch = k ? hi : lo;
            if (k && hi == lo) break;
            if (k) lilac_buf_printf(b, "-");
            if (ch < 32 || ch == ']' || ch == '\\' || ch == '-' || ch == 127) lilac_buf_printf(b, "\\x%02x", ch);
            else lilac_buf_printf(b, "%c", ch);
        }
        lo = hi;
    }
    lilac_buf_printf(b, "%s]", c->high ? "\\u0080-" : "");
}

char *lg_dump(const lg_grammar *g) {
    lilac_buf b = LILAC_BUF_INIT;
    for (int r = 0; r < g->n_rule; r++) {
        lilac_buf_printf(&b, "%s%d ::=", g->rule[r].name, r);
        for (int a = 0; a < g->rule[r].n; a++) {
            if (a) lilac_buf_printf(&b, " |");
            uint32_t pc = g->rule[r].alt[a];
            if (g->elem[pc].kind == LG_END) lilac_buf_printf(&b, " \"\"");
            for (; g->elem[pc].kind != LG_END; pc++) {
                const lg_elem *e = &g->elem[pc];
                lilac_buf_printf(&b, " ");
                if (e->kind == LG_BYTES) {
                    lilac_buf_printf(&b, "\"");
                    for (uint32_t i = 0; i < e->n; i++) {
                        unsigned char ch = g->lit[e->a + i];
                        if (ch < 32 || ch >= 127 || ch == '"' || ch == '\\') lilac_buf_printf(&b, "\\x%02x", ch);
                        else lilac_buf_printf(&b, "%c", ch);
                    }
                    lilac_buf_printf(&b, "\"");
                } else if (e->kind == LG_CLASS || e->kind == LG_STAR) {
                    dump_class(&b, &g->cls[e->a]);
                    if (e->kind == LG_STAR) lilac_buf_printf(&b, "*");
                } else if (e->kind == LG_RULE) {
                    lilac_buf_printf(&b, "%s%u", g->rule[e->a].name, e->a);
                } else {
                    lilac_buf_printf(&b, "<token %u>", e->a);
                }
            }
        }
        lilac_buf_printf(&b, "\n");
    }
    if (b.oom) {
        lilac_buf_free(&b);
        return NULL;
    }
    return lilac_buf_take(&b);
}
