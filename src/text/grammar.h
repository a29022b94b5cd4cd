/* grammar.h — constrained decoding: a context-free grammar over bytes, its
 * matcher, and the per-step mask of allowed token ids.
 *
 * Pieces (one file each):
 *   grammar.c        the grammar: rules of alternatives of element sequences,
 *                    built by the compilers below, then finalised (rules that
 *                    cannot finish are dropped; left recursion is an error)
 *   grammar_vocab.c  the vocabulary index, built once per tokenizer: every
 *                    token's bytes and a trie over them (DFS order, subtree
 *                    skips), so a walk prunes every token behind a dead prefix
 *   grammar_match.c  the matcher state: a set of stacks (a pushdown automaton
 *                    over bytes, UTF-8 aware), stepped byte by byte
 *   grammar_mask.c   the allowed-token mask per step (below)
 *   grammar_schema.c JSON Schema -> grammar (JSON text); grammar_num.c numeric
 *                    ranges, grammar_format.c string formats
 *   grammar_tools.c  tool calls in Qwen3.6's XML format -> grammar
 *
 * Elements: a literal byte string, a character class (a set of ASCII bytes,
 * plus optionally every non-ASCII character, matched as valid UTF-8), a
 * class repeated zero or more times ("star"), a reference to a rule, or one
 * specific added token (e.g. <tool_call>), which bytes never match.
 *
 * The mask (grammar_mask.c): for each stack of the current state the top
 * element and its sub-state form a position; per position the tokens are
 * classified once (lazily, cached in the grammar) by a walk of the vocabulary
 * trie from that position alone — "accepted" (some path consumes the whole
 * token without leaving the position's frame), "rejected", or "uncertain"
 * (a path leaves the frame before the token ends: the rest depends on the
 * stack below).  Per step the mask is the union of the accepted sets plus the
 * uncertain tokens whose remaining bytes pass from the actual stack below.
 * Positions whose uncertain set is large (whitespace before a value: every
 * " word" token) are keyed with the frames below them too, so the frame
 * decides.  End tokens are allowed when the grammar can end here.
 */
#ifndef LILAC_TEXT_GRAMMAR_H
#define LILAC_TEXT_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "text/tokenizer.h"
#include "util/err.h"

/* ------------------------------------------------------------ the grammar */

typedef enum { LG_END = 0, LG_BYTES, LG_CLASS, LG_STAR, LG_RULE, LG_TOKEN } lg_kind;

typedef struct {
    uint8_t kind;
    uint32_t a; /* BYTES: offset into lit; CLASS/STAR: class index; RULE: rule index; TOKEN: id */
    uint32_t n; /* BYTES: length */
} lg_elem;

/* A set of characters: ASCII bytes by bit, and every non-ASCII character
 * (U+0080..U+10FFFF but surrogates) when high is set. */
typedef struct {
    uint32_t ascii[4];
    uint8_t high;
} lg_class;

typedef struct lg_grammar lg_grammar;

/* A sequence being built (then added as one alternative of a rule). */
typedef struct {
    lg_elem *v;
    int n, cap;
} lg_seq;

lg_grammar *lg_new(void);
void lg_free(lg_grammar *g);
/* A new rule (no alternatives yet); its index, or -1 when out of memory. */
int lg_rule(lg_grammar *g, const char *name);
/* Appends elements to a sequence (failures are remembered by g). */
void lg_seq_bytes(lg_grammar *g, lg_seq *s, const char *p, size_t n);
void lg_seq_str(lg_grammar *g, lg_seq *s, const char *p); /* NUL-terminated */
void lg_seq_class(lg_grammar *g, lg_seq *s, const lg_class *c, int star);
void lg_seq_rule(lg_grammar *g, lg_seq *s, int rule);
void lg_seq_token(lg_grammar *g, lg_seq *s, int32_t id);
/* Adds the sequence as an alternative of rule and empties it. */
void lg_alt(lg_grammar *g, int rule, lg_seq *s);
void lg_seq_append(lg_grammar *g, lg_seq *s, const lg_seq *from);
void lg_seq_free(lg_seq *s);
/* Rule shortcuts: an alternative of a single element. */
void lg_alt_str(lg_grammar *g, int rule, const char *p);
void lg_alt_rule(lg_grammar *g, int rule, int ref);
void lg_alt_empty(lg_grammar *g, int rule);

/* Class helpers. */
void lg_class_clear(lg_class *c);
void lg_class_add(lg_class *c, int lo, int hi); /* ASCII range [lo, hi] */
void lg_class_del(lg_class *c, int lo, int hi);
int lg_class_has(const lg_class *c, int b);     /* ASCII b */
int lg_class_eq(const lg_class *a, const lg_class *b);

/* Checks and freezes g with rule root as the start: drops alternatives that
 * use rules which can never finish, fails (LILAC_EINVAL, naming the rule)
 * when root cannot finish or a rule is left-recursive.  After this g is
 * immutable but for the mask cache. */
lilac_status lg_finalize(lg_grammar *g, int root, lilac_error *e);
/* Size: elements and rules (for limits and reports). */
size_t lg_size(const lg_grammar *g, int *rules);
/* The grammar in a GBNF-like text (debugging and tests), malloc'd. */
char *lg_dump(const lg_grammar *g);

/* ------------------------------------------------- the vocabulary index */

typedef struct lg_vocab lg_vocab;

/* The index of the tokenizer's ids below vocab (the model's embedding rows):
 * byte strings of the plain (non-added) tokens, in a trie.  Added tokens are
 * matched only as whole tokens (LG_TOKEN elements and end ids). */
lilac_status lg_vocab_new(const lilac_tokenizer *t, int vocab, lg_vocab **out, lilac_error *e);
/* The same from explicit byte strings (tests, benchmarks): tokens[i] of
 * len[i] bytes; special[i] marks added tokens (NULL: none). */
lilac_status lg_vocab_new_raw(int vocab, const char *const *tokens, const size_t *len, const uint8_t *special,
                              lg_vocab **out, lilac_error *e);
void lg_vocab_free(lg_vocab *v);
int lg_vocab_size(const lg_vocab *v);
size_t lg_vocab_nodes(const lg_vocab *v);

/* ---------------------------------------------------------- the matcher */

typedef struct lg_matcher lg_matcher;

/* A matcher of g (finalised; it must outlive the matcher) over v.  end_ids
 * are the ids allowed when the grammar is complete (<|im_end|>, ...). */
lilac_status lg_matcher_new(lg_grammar *g, const lg_vocab *v, const int32_t *end_ids, int n_end, lg_matcher **out,
                            lilac_error *e);
void lg_matcher_free(lg_matcher *m);
/* Writes the ids allowed next into bits ((vocab + 31) / 32 words, bit i%32 of
 * word i/32); returns how many are allowed (0: none, the grammar is finished
 * and no end id exists), or -1 with e set (out of memory, state limit). */
int lg_matcher_mask(lg_matcher *m, uint32_t *bits, lilac_error *e);
/* Advances by token id: 0, or -1 when id is not allowed (state unchanged). */
int lg_matcher_accept(lg_matcher *m, int32_t id);
/* Advances by raw bytes (tests): 0, or -1 when they do not fit (unchanged). */
int lg_matcher_accept_bytes(lg_matcher *m, const char *p, size_t n);
/* The grammar can end here; it can end and nothing else may follow. */
int lg_matcher_can_end(const lg_matcher *m);
int lg_matcher_finished(const lg_matcher *m);
/* Positions of g classified so far and their memory, for reports. */
void lg_cache_stats(const lg_grammar *g, int *positions, size_t *bytes);

/* 1 when the whole of text[0..n) is a sentence of g (tests). */
int lg_match_text(lg_grammar *g, const char *text, size_t n);

/* ------------------------------------------------ the engine's constraint */

typedef struct lg_constraint lg_constraint;

/* A lilac_constraint (lilac.h) over a matcher of g, which it takes (and
 * frees, even on failure).  With think_open the output starts inside a think
 * block, which is free — any id but the end ids, so the answer comes — until
 * think_close; the grammar starts after it.  end_ids end the answer once the
 * grammar is complete. */
lilac_status lg_constraint_new(lg_grammar *g, const lg_vocab *v, const int32_t *end_ids, int n_end, int think_open,
                               int32_t think_close, lg_constraint **out, lilac_error *e);
void lg_constraint_free(lg_constraint *c);
const lilac_constraint *lg_constraint_get(lg_constraint *c);
/* mask() calls so far and the seconds they took (logs, benchmarks). */
void lg_constraint_stats(const lg_constraint *c, long *masks, double *seconds);
/* The last failure's message ("" when none). */
const char *lg_constraint_error(const lg_constraint *c);

/* ------------------------------------------------ compilers (JSON Schema) */

typedef struct {
    int32_t tool_call_open, tool_call_close; /* <tool_call>, </tool_call> ids; -1 = write them as text */
} lg_tokens;

/* The rule for JSON text of any value (depth-limited) / any object. */
int lg_json_any(lg_grammar *g);
int lg_json_object_any(lg_grammar *g);
/* The rule for JSON text valid under schema.  Unsupported keywords (and
 * schemas no JSON value satisfies) fail with LILAC_EINVAL and a message that
 * names the keyword and its place: "<where>/properties/x: ...". */
int lg_json_schema(lg_grammar *g, const json_t *schema, const char *where, lilac_error *e);
/* A whole answer: optional leading newlines (the template writes "\n\n"
 * after </think>), then the value rule. */
int lg_answer_root(lg_grammar *g, int value_rule);

/* Tool calls: one or more (or exactly one) <tool_call> blocks for the tools
 * in `tools` (OpenAI form) whose parameters satisfy each tool's schema. */
int lg_tool_calls(lg_grammar *g, const json_t *tools, int parallel, const lg_tokens *tk, const char *where,
                  lilac_error *e);

#endif
