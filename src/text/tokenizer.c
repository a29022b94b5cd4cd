/* tokenizer.c — encode and decode with a loaded tokenizer (the loader is
 * tokenizer_load.c, the BPE core tokenizer_bpe.c).
 *
 * encode follows Hugging Face's pipeline step for step:
 *   1. repair invalid UTF-8 (lossy, see tokenizer.h);
 *   2. split out added tokens whose normalized=false, on the raw text
 *      (leftmost, then longest; lstrip/rstrip/single_word as HF applies them);
 *   3. NFC-normalize each remaining piece (utf8proc), then split out the
 *      normalized=true added tokens on it;
 *   4. cut each remaining piece with the Split regex (matches and the gaps
 *      between them are pieces: behavior Isolated);
 *   5. BPE each piece's bytes (the byte-level mapping is folded into the
 *      vocabulary, which is stored as raw bytes).
 * Everything mutable lives in a per-call context, so calls may run in
 * parallel; the word cache has its own locks. */
#include <stdlib.h>
#include <utf8proc.h>

#include "text/tokenizer_impl.h"

lilac_status lilac_ids_push(lilac_ids *a, int32_t id, lilac_error *e) {
    if (a->len == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 256;
        int32_t *v = realloc(a->v, cap * sizeof *v);
        if (!v) return lilac_fail(e, LILAC_ENOMEM, "tokenizer: out of memory (%zu ids)", a->len);
        a->v = v;
        a->cap = cap;
    }
    a->v[a->len++] = id;
    return LILAC_OK;
}

void lilac_ids_free(lilac_ids *a) {
    if (!a) return;
    free(a->v);
    a->v = NULL;
    a->len = a->cap = 0;
}

typedef struct {
    const lilac_tokenizer *t;
    int flags;
    lilac_ids *out;
    lilac_error *e;
    lilac_tok_scratch *scratch;
    pcre2_match_data *md;
} enc;

/* ---- step 4: the Split regex --------------------------------------------- */

static lilac_status regex_fail(enc *c, int rc) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    return lilac_fail(c->e, LILAC_EINVAL, "tokenizer: pre-tokenizer regex failed: %s", (const char *)msg);
}

static lilac_status pretokenize(enc *c, const unsigned char *s, size_t n) {
    const lilac_tokenizer *t = c->t;
    lilac_status st;
    if (!t->split) return lilac_tok_bpe(t, c->scratch, s, n, c->flags, c->out, c->e);
    size_t pos = 0, gap = 0; /* s[gap..) is not yet emitted */
    while (pos < n) {
        int rc = pcre2_match(t->split, s, n, pos, PCRE2_NO_UTF_CHECK, c->md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) /* very long runs: the interpreter keeps its stack on the heap */
            rc = pcre2_match(t->split, s, n, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, c->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) return regex_fail(c, rc);
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) { /* an empty match cuts nothing: step over one character */
            if (ms >= n) break;
            pos = ms + 1;
            while (pos < n && (s[pos] & 0xC0) == 0x80) pos++;
            continue;
        }
        if (gap < ms && (st = lilac_tok_bpe(t, c->scratch, s + gap, ms - gap, c->flags, c->out, c->e))) return st;
        if ((st = lilac_tok_bpe(t, c->scratch, s + ms, me - ms, c->flags, c->out, c->e))) return st;
        gap = pos = me;
    }
    if (gap < n) return lilac_tok_bpe(t, c->scratch, s + gap, n - gap, c->flags, c->out, c->e);
    return LILAC_OK;
}

/* ---- step 2/3: added tokens ------------------------------------------------ */

/* Does the single character at s[0..n) match re (anchored)? */
static int char_is(const pcre2_code *re, const unsigned char *s, size_t n) {
    pcre2_match_data *md = pcre2_match_data_create(1, NULL); /* rare path: only flagged tokens */
    if (!md) return 0;
    int rc = pcre2_match(re, s, n, 0, PCRE2_NO_UTF_CHECK, md, NULL);
    pcre2_match_data_free(md);
    return rc > 0;
}

static size_t char_len_at(const unsigned char *s, size_t n, size_t i) {
    size_t k = i + 1;
    while (k < n && (s[k] & 0xC0) == 0x80) k++;
    return k - i;
}

static size_t char_start_before(const unsigned char *s, size_t i) {
    size_t k = i - 1;
    while (k > 0 && (s[k] & 0xC0) == 0x80) k--;
    return k;
}

static lilac_status split_added(enc *c, const unsigned char *s, size_t n, int pass);

/* Steps 3-5 for a piece between added tokens. */
static lilac_status text_piece(enc *c, const unsigned char *s, size_t n, int pass) {
    const lilac_tokenizer *t = c->t;
    if (pass == 1) return pretokenize(c, s, n);
    int ascii = 1;
    for (size_t i = 0; i < n && ascii; i++) ascii = s[i] < 0x80;
    if (!t->nfc || ascii) /* ASCII is always NFC */
        return t->has_normalized_added ? split_added(c, s, n, 1) : pretokenize(c, s, n);
    utf8proc_uint8_t *nfc = NULL;
    utf8proc_ssize_t m = utf8proc_map(s, (utf8proc_ssize_t)n, &nfc, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (m < 0) {
        free(nfc);
        return lilac_fail(c->e, m == UTF8PROC_ERROR_NOMEM ? LILAC_ENOMEM : LILAC_EINVAL,
                          "tokenizer: NFC normalization failed: %s", utf8proc_errmsg(m));
    }
    lilac_status st = t->has_normalized_added ? split_added(c, nfc, (size_t)m, 1) : pretokenize(c, nfc, (size_t)m);
    free(nfc);
    return st;
}

/* Pass 0 matches the normalized=false added tokens on raw text, pass 1 the
 * normalized=true ones on NFC text.  Matching is leftmost, then longest, and
 * resumes after each match, like HF's Aho-Corasick LeftmostLongest search. */
static lilac_status split_added(enc *c, const unsigned char *s, size_t n, int pass) {
    const lilac_tokenizer *t = c->t;
    uint8_t bit = pass == 0 ? 1 : 2;
    size_t pos = 0, done = 0; /* s[done..) not yet emitted */
    lilac_status st;
    while (pos < n) {
        const tok_added *best = NULL;
        size_t at = pos;
        for (; at < n && !best; at++) {
            if (!(t->added_first[s[at]] & bit)) continue;
            for (int k = 0; k < t->n_added; k++) {
                const tok_added *a = &t->added[k];
                if (a->normalized != pass || a->match_len == 0 || a->match_len > n - at) continue;
                if ((best && a->match_len <= best->match_len) || memcmp(a->match, s + at, a->match_len) != 0) continue;
                best = a;
            }
        }
        if (!best) break;
        at--;
        size_t start = at, stop = at + best->match_len;
        pos = stop;
        if ((c->flags & LILAC_TOK_SPLIT_SPECIAL) && best->special) continue;
        if (best->single_word) {
            int word_before =
                start > 0 && char_is(t->re_word, s + char_start_before(s, start), start - char_start_before(s, start));
            int word_after = stop < n && char_is(t->re_word, s + stop, char_len_at(s, n, stop));
            if (word_before || word_after) continue;
        }
        if (best->lstrip) /* take the whitespace before it, but not what an earlier match took */
            while (start > done &&
                   char_is(t->re_space, s + char_start_before(s, start), start - char_start_before(s, start)))
                start = char_start_before(s, start);
        if (best->rstrip)
            while (stop < n && char_is(t->re_space, s + stop, char_len_at(s, n, stop))) stop += char_len_at(s, n, stop);
        if (done < start && (st = text_piece(c, s + done, start - done, pass))) return st;
        if ((st = lilac_ids_push(c->out, best->id, c->e))) return st;
        done = pos = stop;
    }
    if (done < n) return text_piece(c, s + done, n - done, pass);
    return LILAC_OK;
}

lilac_status lilac_tokenizer_encode(const lilac_tokenizer *t, const char *text, size_t len, int flags, lilac_ids *out,
                                    lilac_error *e) {
    if (len == 0) return LILAC_OK;
    lilac_buf fixed = LILAC_BUF_INIT;
    const unsigned char *s = (const unsigned char *)text;
    if (lilac_utf8_valid_prefix(text, len) != len) {
        lilac_utf8_lossy(text, len, &fixed);
        if (fixed.oom) {
            lilac_buf_free(&fixed);
            return lilac_fail(e, LILAC_ENOMEM, "tokenizer: out of memory");
        }
        s = (const unsigned char *)fixed.data;
        len = fixed.len;
    }
    enc c = {t, flags, out, e, lilac_tok_scratch_new(), NULL};
    lilac_status st = LILAC_OK;
    if (t->split) c.md = pcre2_match_data_create_from_pattern(t->split, NULL);
    if (!c.scratch || (t->split && !c.md))
        st = lilac_fail(e, LILAC_ENOMEM, "tokenizer: out of memory");
    else
        st = split_added(&c, s, len, 0);
    pcre2_match_data_free(c.md);
    lilac_tok_scratch_free(c.scratch);
    lilac_buf_free(&fixed);
    return st;
}

/* ---- lookups ------------------------------------------------------------- */

int32_t lilac_tokenizer_n_ids(const lilac_tokenizer *t) { return t->n_ids; }

const char *lilac_tokenizer_token(const lilac_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_ids || t->tokens[id].kind == TOK_NONE) return NULL;
    if (len) *len = t->tokens[id].len;
    return t->arena + t->tokens[id].off;
}

int32_t lilac_tokenizer_find(const lilac_tokenizer *t, const char *s, size_t len) {
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].len == len && memcmp(t->added[i].content, s, len) == 0) return t->added[i].id;
    return tok_vocab_find(t, s, len, tok_hash(s, len));
}

int32_t lilac_tokenizer_id(const lilac_tokenizer *t, const char *s) { return lilac_tokenizer_find(t, s, strlen(s)); }

int lilac_tokenizer_is_added(const lilac_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_ids && t->tokens[id].kind == TOK_ADDED;
}

int lilac_tokenizer_is_special(const lilac_tokenizer *t, int32_t id) {
    return lilac_tokenizer_is_added(t, id) && t->tokens[id].special;
}

/* ---- decoding ------------------------------------------------------------ */

static lilac_status bad_id(lilac_error *e, int32_t id, size_t at, int32_t n_ids) {
    if (at == SIZE_MAX)
        return lilac_fail(e, LILAC_EINVAL, "token id %d is not in the vocabulary (0..%d)", id, n_ids - 1);
    return lilac_fail(e, LILAC_EINVAL, "token id %d (at position %zu) is not in the vocabulary (0..%d)", id, at,
                      n_ids - 1);
}

lilac_status lilac_tokenizer_decode(const lilac_tokenizer *t, const int32_t *ids, size_t n, int flags, lilac_buf *out,
                                    lilac_error *e) {
    for (size_t i = 0; i < n; i++)
        if (!lilac_tokenizer_token(t, ids[i], NULL)) return bad_id(e, ids[i], i, t->n_ids);
    lilac_tok_stream s;
    lilac_tok_stream_init(&s, t, flags);
    for (size_t i = 0; i < n; i++) lilac_tok_stream_push(&s, ids[i], out, e);
    lilac_tok_stream_finish(&s, out);
    return out->oom ? lilac_fail(e, LILAC_ENOMEM, "tokenizer: out of memory") : LILAC_OK;
}

void lilac_tok_stream_init(lilac_tok_stream *s, const lilac_tokenizer *t, int flags) {
    s->tok = t;
    s->flags = flags;
    s->utf8 = (lilac_utf8_stream)LILAC_UTF8_STREAM_INIT;
}

lilac_status lilac_tok_stream_push(lilac_tok_stream *s, int32_t id, lilac_buf *out, lilac_error *e) {
    size_t len;
    const char *p = lilac_tokenizer_token(s->tok, id, &len);
    if (!p) return bad_id(e, id, SIZE_MAX, s->tok->n_ids);
    if ((s->flags & LILAC_TOK_SKIP_SPECIAL) && lilac_tokenizer_is_special(s->tok, id)) return LILAC_OK;
    lilac_utf8_stream_push(&s->utf8, p, len, out);
    return LILAC_OK;
}

void lilac_tok_stream_push_bytes(lilac_tok_stream *s, const void *p, size_t n, lilac_buf *out) {
    lilac_utf8_stream_push(&s->utf8, p, n, out);
}

void lilac_tok_stream_finish(lilac_tok_stream *s, lilac_buf *out) { lilac_utf8_stream_finish(&s->utf8, out); }
