/* grammar_impl.h — the insides of the grammar, the vocabulary index and the
 * matcher, shared by src/text/grammar*.c only. */
#ifndef LILAC_TEXT_GRAMMAR_IMPL_H
#define LILAC_TEXT_GRAMMAR_IMPL_H

#include "text/grammar.h"

/* ----------------------------------------------------------------- grammar */

typedef struct {
    char name[40];
    uint32_t *alt; /* first element (pc) of each alternative */
    int n, cap;
} lg_rule_t;

typedef struct lg_cache lg_cache; /* grammar_mask.c */

/* Rules the schema compiler shares within one grammar, made on first use. */
enum { LG_SH_WS, LG_SH_STRING, LG_SH_STRBODY, LG_SH_NUMBER, LG_SH_INTEGER, LG_SH_BOOL, LG_SH_NULL, LG_SH_KEY,
       LG_SH_RAW, LG_SH_N };
#define LG_ANY_DEPTH 10 /* nesting of "any JSON value" */

struct lg_grammar {
    lg_elem *elem;
    size_t n_elem, cap_elem;
    unsigned char *lit;
    size_t n_lit, cap_lit;
    lg_class *cls;
    int n_cls, cap_cls;
    lg_rule_t *rule;
    int n_rule, cap_rule;
    int root;
    int final;
    int oom;
    int shared[LG_SH_N];
    int any[LG_ANY_DEPTH + 1];     /* any value at depth d, -1 until made */
    int any_obj[LG_ANY_DEPTH + 1];
    lg_cache *cache;
};

/* ------------------------------------------------------------------ vocab */

struct lg_vocab {
    int V;            /* ids 0..V-1 */
    int words;        /* (V + 31) / 32 */
    uint32_t *off;    /* [V] bytes of id at bytes[off[id] .. off[id] + len[id]) */
    uint16_t *len;    /* [V]; 0: no bytes (added, unknown or padding id) */
    uint8_t *added;   /* [V] 1: an added token (matched whole, never by bytes) */
    unsigned char *bytes;
    /* the trie, nodes 0..n-1 in DFS order (the root is implicit) */
    size_t n;
    uint8_t *byte;    /* [n] */
    uint16_t *depth;  /* [n] 1 for the root's children */
    uint32_t *skip;   /* [n] the first node after this node's subtree */
    int32_t *tok;     /* [n] the token ending here, or -1 */
    int max_len;      /* longest token in bytes */
};

/* ---------------------------------------------------------- stacks, sets */

/* A stack frame: the element to match next (top) or to return to (below),
 * with the top's sub-state (BYTES: offset; CLASS/STAR: UTF-8 state). */
typedef struct {
    uint32_t pc;
    uint32_t sub;
    int32_t parent; /* a node index, or LG_BOTTOM / LG_SCOPE */
} lg_node;

#define LG_BOTTOM (-1) /* below the root: popping here completes the grammar */
#define LG_SCOPE (-2)  /* below a classified position: the context, unknown */

typedef struct {
    lg_node *v;
    size_t n, cap;
    int oom;
} lg_pool;

/* A state: the stacks' top nodes, and whether the grammar can complete
 * (accept) or the classified frame can be left (exit) with no more bytes. */
typedef struct {
    int32_t *top;
    int n, cap;
    uint8_t accept, exit;
    uint8_t over; /* overflowed LG_MAX_TOPS or the closure depth: incomplete */
} lg_set;

#define LG_MAX_TOPS 8192 /* stacks in one state before the matcher gives up */

int lg_pool_push(lg_pool *p, uint32_t pc, uint32_t sub, int32_t parent);
void lg_pool_free(lg_pool *p);
void lg_set_clear(lg_set *s);
void lg_set_free(lg_set *s);
/* Adds the stacks that continue at pc (sub) over parent, expanding rule
 * references and skipping stars, to s. */
void lg_add(const lg_grammar *g, lg_pool *p, lg_set *s, uint32_t pc, uint32_t sub, int32_t parent);
/* out = the state after byte b from in (out cleared first). */
void lg_step(const lg_grammar *g, lg_pool *p, const lg_set *in, unsigned b, lg_set *out);
/* out = the state after added token id (a LG_TOKEN element) from in. */
void lg_step_token(const lg_grammar *g, lg_pool *p, const lg_set *in, int32_t id, lg_set *out);
/* Two stacks are equal (same frames down to the same base). */
int lg_chain_equal(const lg_pool *p, int32_t a, int32_t b);
/* Copies the stacks of in (nodes in from) into to, which is emptied first;
 * out gets their new top indices.  remap: scratch of from->n entries. */
int lg_copy_state(const lg_pool *from, const lg_set *in, lg_pool *to, lg_set *out, int32_t **remap, size_t *remap_cap);

/* ---------------------------------------------------------------- matcher */

struct lg_matcher {
    lg_grammar *g;
    const lg_vocab *v;
    int32_t *end;
    int n_end;
    lg_pool pool; /* the current state's nodes */
    lg_set cur;
    int finished; /* an end id was accepted */
    int failed;   /* a state overflowed */
    /* scratch for stepping and masks */
    lg_pool tmp;
    lg_set s[2];
    int32_t *remap;
    size_t remap_cap;
    lg_set *depth_set; /* [max_len + 2] per-depth states of suffix walks */
    int depth_cap;
};

/* grammar_mask.c */
void lg_cache_free(lg_cache *c);
size_t lg_cache_bytes(const lg_cache *c, int *positions);

/* UTF-8 sub-states of a class element (0: at a character boundary). */
int lg_utf8_next(uint32_t sub, unsigned b, int *complete);

#endif
