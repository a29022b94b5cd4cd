/* tokenizer_impl.h — the inside of lilac_tokenizer, shared by the loader
 * (tokenizer_load.c, tokenizer_pipeline.c), the BPE core (tokenizer_bpe.c)
 * and encode/decode (tokenizer.c).  Not for use outside src/text/tokenizer*.c. */
#ifndef LILAC_TEXT_TOKENIZER_IMPL_H
#define LILAC_TEXT_TOKENIZER_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "text/tokenizer.h"

enum { TOK_NONE = 0, TOK_BPE = 1, TOK_ADDED = 2 };

typedef struct {
    uint32_t off, len; /* raw bytes at arena[off .. off+len) */
    uint8_t kind;      /* TOK_NONE for ids nobody defines */
    uint8_t special;
} tok_entry;

typedef struct {
    char *content; /* raw UTF-8, as written in the file */
    size_t len;
    char *match; /* what is searched for: content, or NFC(content) when normalized */
    size_t match_len;
    int32_t id;
    uint8_t special, lstrip, rstrip, single_word, normalized;
} tok_added;

/* Open-addressing map from raw token bytes to id (BPE vocabulary only). */
typedef struct {
    uint32_t hash;
    int32_t id;        /* -1 = empty slot */
    uint32_t off, len; /* the token's bytes, copied here to spare a cache miss */
} tok_vslot;

/* Open-addressing map from (left id, right id) to (rank, merged id). */
typedef struct {
    uint64_t key; /* left << 32 | right; UINT64_MAX = empty */
    uint32_t rank;
    int32_t merged;
} tok_mslot;

/* The word cache: direct-mapped, a fixed number of slots, each slot guarded
 * by one of TOK_CACHE_LOCKS mutexes (slot index mod TOK_CACHE_LOCKS), so
 * concurrent encoders rarely meet and never see a half-written entry. */
#define TOK_CACHE_KEY 26
#define TOK_CACHE_IDS 8
#define TOK_CACHE_SLOTS (1u << 15)
#define TOK_CACHE_LOCKS 64
typedef struct {
    uint32_t hash;
    uint8_t klen, nids; /* klen == 0: empty */
    char key[TOK_CACHE_KEY];
    int32_t ids[TOK_CACHE_IDS];
} tok_cache_entry;

struct lilac_tokenizer {
    int32_t n_ids;
    tok_entry *tokens; /* [n_ids] */
    char *arena;       /* raw bytes of every token */
    size_t arena_len, arena_cap;

    tok_vslot *vocab; /* [vocab_mask + 1] */
    uint32_t vocab_mask, vocab_count;
    tok_mslot *merges; /* [merge_mask + 1] */
    uint32_t merge_mask, merge_count;

    int32_t byte_id[256]; /* id of each single byte, -1 when the vocab lacks it */
    int32_t unk_id;       /* -1: bytes without a token are dropped, as HF does */
    int fuse_unk, ignore_merges;

    tok_added *added; /* [n_added], in file order */
    int n_added;
    uint8_t added_first[256]; /* bit 1: a non-normalized token starts with this byte,
                                      bit 2: a normalized one does */
    int has_normalized_added;
    int needs_word_classes;         /* some added token uses lstrip/rstrip/single_word */
    pcre2_code *re_word, *re_space; /* Rust regex \w and \s, for those flags */

    int nfc;           /* normalizer is NFC */
    pcre2_code *split; /* the pre-tokenizer Split regex (JIT-compiled when possible), or NULL */

    tok_cache_entry *cache;      /* [TOK_CACHE_SLOTS] */
    pthread_mutex_t *cache_lock; /* [TOK_CACHE_LOCKS] */
    int cache_ready;
};

/* 32-bit hash of a byte string (used for the vocab map and the word cache). */
static inline uint32_t tok_hash(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w = (uint64_t)s[0] | (uint64_t)s[1] << 8 | (uint64_t)s[2] << 16 | (uint64_t)s[3] << 24 |
                     (uint64_t)s[4] << 32 | (uint64_t)s[5] << 40 | (uint64_t)s[6] << 48 | (uint64_t)s[7] << 56;
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    for (size_t k = 0; k < n; k++) w |= (uint64_t)s[k] << (8 * k);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
    return (uint32_t)h;
}

static inline uint64_t tok_mix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    return k;
}

/* The BPE vocabulary id of raw bytes s[0..n), or -1. */
static inline int32_t tok_vocab_find(const lilac_tokenizer *t, const void *s, size_t n, uint32_t h) {
    uint32_t i = h & t->vocab_mask;
    for (;;) {
        const tok_vslot *v = &t->vocab[i];
        if (v->id < 0) return -1;
        if (v->hash == h && v->len == n && memcmp(t->arena + v->off, s, n) == 0) return v->id;
        i = (i + 1) & t->vocab_mask;
    }
}

/* The merge of (a, b): its rank and result, or 0 when there is none. */
static inline int tok_merge_find(const lilac_tokenizer *t, int32_t a, int32_t b, uint32_t *rank, int32_t *merged) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint32_t i = (uint32_t)tok_mix64(key) & t->merge_mask;
    for (;;) {
        const tok_mslot *m = &t->merges[i];
        if (m->key == key) {
            *rank = m->rank;
            *merged = m->merged;
            return 1;
        }
        if (m->key == UINT64_MAX) return 0;
        i = (i + 1) & t->merge_mask;
    }
}

/* tokenizer_bpe.c: appends the BPE ids of one pre-token (raw bytes). */
typedef struct lilac_tok_scratch lilac_tok_scratch;
lilac_tok_scratch *lilac_tok_scratch_new(void);
void lilac_tok_scratch_free(lilac_tok_scratch *s);
lilac_status lilac_tok_bpe(const lilac_tokenizer *t, lilac_tok_scratch *s, const unsigned char *p, size_t n, int flags,
                           lilac_ids *out, lilac_error *e);
lilac_status lilac_tok_cache_init(lilac_tokenizer *t, lilac_error *e);
void lilac_tok_cache_free(lilac_tokenizer *t);

/* tokenizer_pipeline.c: reads the normalizer, pre_tokenizer, post_processor
 * and decoder sections (each may be NULL when absent) into t. */
lilac_status lilac_tok_read_pipeline(lilac_tokenizer *t, const char *path, const json_t *normalizer,
                                     const json_t *pre_tokenizer, const json_t *post_processor, const json_t *decoder,
                                     lilac_error *e);
/* Compiles t->re_word and t->re_space (for lstrip/rstrip/single_word tokens). */
lilac_status lilac_tok_word_classes(lilac_tokenizer *t, const char *path, lilac_error *e);

#endif
