/* tokenizer.h — the byte-level BPE tokenizer of Qwen3.5/3.6 (and Qwen2/3),
 * read from a Hugging Face tokenizer.json.
 *
 * Everything comes from the file: the NFC normalizer, the Split regex of the
 * pre-tokenizer (run with PCRE2, UTF + UCP, `\s` read as Unicode White_Space
 * as Oniguruma does), the byte-level alphabet, the vocabulary, the merges and
 * the added tokens (plus those that only tokenizer_config.json lists in its
 * added_tokens_decoder).  encode() gives the ids the Hugging Face `tokenizers`
 * library gives for tokenizer.encode(text, add_special_tokens=False).
 *
 * Policies:
 * - Invalid UTF-8 given to encode is first repaired the way Rust's
 *   String::from_utf8_lossy does (one U+FFFD per maximal invalid subpart, see
 *   text/utf8.h), so decode(encode(x)) == NFC(lossy(x)).  It never fails.
 * - decode maps ids to bytes (byte-level tokens to their bytes, added tokens
 *   to their content) and repairs the result the same way, as HF's decode
 *   (errors="replace") does.  The stream decoder emits only complete
 *   characters; a sequence still unfinished at lilac_tok_stream_finish()
 *   becomes one U+FFFD, so the streamed text always equals decode() of all ids.
 * - Known differences from HF come only from Unicode versions: PCRE2 10.42
 *   knows Unicode 14 while HF's regex engine knows newer characters, and
 *   HF's NFC uses older tables than utf8proc (2.8, Unicode 15), so text with
 *   recently assigned letters or marks can split differently (about 1 in
 *   2000 random strings drawn from all of Unicode; none in real text tested).
 * - Thread safety: a loaded tokenizer is immutable except for an internal word
 *   cache guarded by striped mutexes; encode and decode may be called from
 *   any number of threads at once on one tokenizer.
 */
#ifndef LILAC_TEXT_TOKENIZER_H
#define LILAC_TEXT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "text/utf8.h"
#include "util/buf.h"
#include "util/err.h"

typedef struct lilac_tokenizer lilac_tokenizer;

/* A growable array of token ids.  Start from LILAC_IDS_INIT (or zeroes);
 * functions append; lilac_ids_free releases it. */
typedef struct {
    int32_t *v;
    size_t len, cap;
} lilac_ids;

#define LILAC_IDS_INIT {NULL, 0, 0}

lilac_status lilac_ids_push(lilac_ids *a, int32_t id, lilac_error *e);
void lilac_ids_free(lilac_ids *a);

/* Loads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json. */
lilac_status lilac_tokenizer_load(const char *model_dir, lilac_tokenizer **out, lilac_error *e);

/* The same from explicit paths; config_path may be NULL. */
lilac_status lilac_tokenizer_load_files(const char *tokenizer_json, const char *config_path,
                                        lilac_tokenizer **out, lilac_error *e);

void lilac_tokenizer_free(lilac_tokenizer *t);

/* encode flags */
enum {
    /* Added tokens marked special (<|im_start|>, <|endoftext|> ...) are read
     * as plain text; non-special added tokens (<think>, <tool_call>) are still
     * matched.  This is HF's `encode_special_tokens` / transformers'
     * `split_special_tokens=True`; use it for untrusted user text. */
    LILAC_TOK_SPLIT_SPECIAL = 1,
    /* Bypasses the word cache (benchmarks and tests). */
    LILAC_TOK_NO_CACHE = 2,
};

/* Appends the ids of text[0..len) to out.  Added tokens are matched as whole
 * tokens anywhere in the text first (leftmost, longest).  Fails only when out
 * of memory or when the regex engine reports an internal limit. */
lilac_status lilac_tokenizer_encode(const lilac_tokenizer *t, const char *text, size_t len,
                                    int flags, lilac_ids *out, lilac_error *e);

/* decode flags */
enum {
    LILAC_TOK_SKIP_SPECIAL = 1, /* leave out added tokens marked special */
};

/* Appends the text of ids[0..n) to out (repaired UTF-8).  An id with no token
 * (negative, >= lilac_tokenizer_n_ids, or a hole) is an LILAC_EINVAL error
 * naming its position, and nothing is appended. */
lilac_status lilac_tokenizer_decode(const lilac_tokenizer *t, const int32_t *ids, size_t n,
                                    int flags, lilac_buf *out, lilac_error *e);

/* 1 + the largest id of the vocabulary and the added tokens. */
int32_t lilac_tokenizer_n_ids(const lilac_tokenizer *t);

/* The raw bytes of token id (byte-level tokens decoded to bytes; added tokens
 * their content), or NULL when id has no token.  Not NUL-terminated. */
const char *lilac_tokenizer_token(const lilac_tokenizer *t, int32_t id, size_t *len);

/* The id of a token given by its exact raw bytes (added tokens first, e.g.
 * "<|im_end|>", then the vocabulary, e.g. " the"), or -1. */
int32_t lilac_tokenizer_find(const lilac_tokenizer *t, const char *s, size_t len);
int32_t lilac_tokenizer_id(const lilac_tokenizer *t, const char *s); /* NUL-terminated s */

int lilac_tokenizer_is_added(const lilac_tokenizer *t, int32_t id);   /* any added token */
int lilac_tokenizer_is_special(const lilac_tokenizer *t, int32_t id); /* added, special=true */

/* The streaming decoder: push ids as they are generated, get the text they
 * complete.  Plain struct; no allocation of its own. */
typedef struct {
    const lilac_tokenizer *tok;
    int flags; /* decode flags */
    lilac_utf8_stream utf8;
} lilac_tok_stream;

void lilac_tok_stream_init(lilac_tok_stream *s, const lilac_tokenizer *t, int flags);
/* Appends the complete characters that id finishes; an id with no token is
 * LILAC_EINVAL (the stream is unchanged). */
lilac_status lilac_tok_stream_push(lilac_tok_stream *s, int32_t id, lilac_buf *out, lilac_error *e);
/* Raw bytes (e.g. from another source) go through the same assembler. */
void lilac_tok_stream_push_bytes(lilac_tok_stream *s, const void *p, size_t n, lilac_buf *out);
/* Flushes: an unfinished character becomes U+FFFD.  The stream can be reused. */
void lilac_tok_stream_finish(lilac_tok_stream *s, lilac_buf *out);

#endif
