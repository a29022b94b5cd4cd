/* test_tokenizer.c — the byte-level BPE tokenizer (src/text/tokenizer.h) and
 * the UTF-8 helpers (src/text/utf8.h).
 *
 * Golden data comes from the Hugging Face `tokenizers` library
 * (tools/gen_tokenizer_golden.py; the dev files came with the fixtures):
 *   tests/fixtures/tokenizer/qwen3/tokenize_golden_dev.json, tiny/tokenize_golden_dev.json
 *   tests/fixtures/tokenizer/golden_{qwen3,tiny}.json  (scripts, code, added tokens,
 *       split_special, invalid UTF-8, random mixtures)
 *   tests/fixtures/tokenizer/flags/   (lstrip/rstrip/single_word/normalized added
 *       tokens, "a b" merges before the vocab, a config-only added token)
 * The real Qwen3.6 vectors run when LILAC_QWEN36_TOKENIZER names its
 * tokenizer.json (or the directory holding it). */
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utf8proc.h>

#include "check.h"
#include "text/tokenizer.h"
#include "text/utf8.h"
#include "util/file.h"

#define QWEN3 "tests/fixtures/tokenizer/qwen3"
#define TINY "tests/fixtures/tiny"
#define FLAGS "tests/fixtures/tokenizer/flags"

static lilac_tokenizer *qwen3, *tiny, *flags;

static uint64_t rng_state = 0x5eed1234abcdULL;
static uint32_t rnd(void) { /* xorshift64*: reproducible splits and fuzz */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1DULL) >> 32);
}

static lilac_tokenizer *load_dir(const char *dir) {
    lilac_tokenizer *t = NULL;
    lilac_error e = {0};
    lilac_status st = lilac_tokenizer_load(dir, &t, &e);
    CHECK(st == LILAC_OK, "loading %s: %s", dir, e.msg);
    return t;
}

static json_t *load_json(const char *path) {
    json_error_t je;
    json_t *j = json_load_file(path, JSON_ALLOW_NUL, &je);
    CHECK(j != NULL, "%s: %s", path, je.text);
    return j;
}

/* Text of a golden entry: "text", or the bytes of "hex". */
static char *entry_bytes(const json_t *o, size_t *len) {
    const json_t *hex = json_object_get(o, "hex");
    if (json_is_string(hex)) {
        const char *h = json_string_value(hex);
        size_t n = strlen(h) / 2;
        char *b = malloc(n + 1);
        for (size_t i = 0; i < n; i++) {
            unsigned v;
            sscanf(h + 2 * i, "%2x", &v);
            b[i] = (char)v;
        }
        *len = n;
        return b;
    }
    const json_t *t = json_object_get(o, "text");
    *len = json_string_length(t);
    char *b = malloc(*len + 1);
    memcpy(b, json_string_value(t), *len);
    return b;
}

static int ids_equal(const lilac_ids *got, const json_t *want) {
    if (got->len != json_array_size(want)) return 0;
    for (size_t i = 0; i < got->len; i++)
        if (got->v[i] != json_integer_value(json_array_get(want, i))) return 0;
    return 1;
}

static void print_ids(const char *what, const lilac_ids *got, const json_t *want) {
    fprintf(stderr, "    %s got:  [", what);
    for (size_t i = 0; i < got->len && i < 40; i++) fprintf(stderr, "%s%d", i ? "," : "", got->v[i]);
    fprintf(stderr, "]\n    want: [");
    for (size_t i = 0; i < json_array_size(want) && i < 40; i++)
        fprintf(stderr, "%s%lld", i ? "," : "", (long long)json_integer_value(json_array_get(want, i)));
    fprintf(stderr, "]\n");
}

/* Checks every entry of a golden file: ids, decode == HF decode, and for
 * invalid input that our lossy repair equals Python's. */
static void run_golden(lilac_tokenizer *t, const char *path, const char *ids_key) {
    if (!t) return;
    json_t *g = load_json(path);
    if (!g) return;
    size_t n = json_array_size(g), bad = 0;
    CHECK(n > 0, "%s is empty", path);
    for (size_t i = 0; i < n; i++) {
        const json_t *o = json_array_get(g, i);
        size_t len;
        char *text = entry_bytes(o, &len);
        int split = json_is_true(json_object_get(o, "split_special")) ||
                    json_is_false(json_object_get(o, "parse_special"));
        lilac_ids ids = LILAC_IDS_INIT;
        lilac_error e = {0};
        lilac_status st = lilac_tokenizer_encode(t, text, len, split ? LILAC_TOK_SPLIT_SPECIAL : 0, &ids, &e);
        const json_t *want = json_object_get(o, ids_key);
        int ok = st == LILAC_OK && ids_equal(&ids, want);
        CHECK(ok, "%s entry %zu (%zu bytes%s): ids differ from HF", path, i, len, split ? ", split_special" : "");
        if (!ok && bad++ < 5) print_ids("ids", &ids, want);
        lilac_ids raw = LILAC_IDS_INIT; /* the word cache changes nothing */
        lilac_tokenizer_encode(t, text, len, (split ? LILAC_TOK_SPLIT_SPECIAL : 0) | LILAC_TOK_NO_CACHE, &raw, &e);
        CHECK(raw.len == ids.len && (ids.len == 0 || memcmp(raw.v, ids.v, ids.len * sizeof ids.v[0]) == 0),
              "%s entry %zu: ids differ without the word cache", path, i);
        lilac_ids_free(&raw);
        const json_t *dec = json_object_get(o, "decoded");
        if (json_is_string(dec)) {
            lilac_buf out = LILAC_BUF_INIT;
            st = lilac_tokenizer_decode(t, ids.v, ids.len, 0, &out, &e);
            CHECK(st == LILAC_OK && out.len == json_string_length(dec) &&
                      memcmp(out.data ? out.data : "", json_string_value(dec), out.len) == 0,
                  "%s entry %zu: decode differs from HF's", path, i);
            lilac_buf_free(&out);
        }
        const json_t *lossy = json_object_get(o, "lossy");
        if (json_is_string(lossy)) {
            lilac_buf out = LILAC_BUF_INIT;
            lilac_utf8_lossy(text, len, &out);
            CHECK(out.len == json_string_length(lossy) && memcmp(out.data, json_string_value(lossy), out.len) == 0,
                  "%s entry %zu: lossy UTF-8 repair differs from Python's errors='replace'", path, i);
            lilac_buf_free(&out);
        }
        lilac_ids_free(&ids);
        free(text);
    }
    json_decref(g);
}

static void test_hf_dev_golden(void) {
    run_golden(qwen3, QWEN3 "/tokenize_golden_dev.json", "ids");
    run_golden(tiny, TINY "/tokenize_golden_dev.json", "ids");
}

static void test_hf_golden_qwen3(void) { run_golden(qwen3, "tests/fixtures/tokenizer/golden_qwen3.json", "ids"); }
static void test_hf_golden_tiny(void) { run_golden(tiny, "tests/fixtures/tokenizer/golden_tiny.json", "ids"); }
static void test_hf_golden_added_flags(void) { run_golden(flags, FLAGS "/golden.json", "ids"); }

/* The tiny tokenizer written with "a b" merges before the vocab (the flags
 * variant) gives the same ids as the original on plain text. */
static void test_merge_forms_agree(void) {
    if (!tiny || !flags) return;
    const char *texts[] = {"Hello, world!", "The quick brown fox jumps over the lazy dog.", "línea en español",
                           "def f(x):\n    return x * 2\n"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        lilac_ids a = LILAC_IDS_INIT, b = LILAC_IDS_INIT;
        lilac_error e = {0};
        lilac_tokenizer_encode(tiny, texts[i], strlen(texts[i]), 0, &a, &e);
        lilac_tokenizer_encode(flags, texts[i], strlen(texts[i]), 0, &b, &e);
        CHECK(a.len == b.len && a.len > 0 && memcmp(a.v, b.v, a.len * sizeof a.v[0]) == 0,
              "'%s': list-form and string-form merges disagree", texts[i]);
        lilac_ids_free(&a);
        lilac_ids_free(&b);
    }
}

/* ---- round trips ------------------------------------------------------- */

static void nfc_lossy(const char *s, size_t n, lilac_buf *out) {
    lilac_buf l = LILAC_BUF_INIT;
    lilac_utf8_lossy(s, n, &l);
    utf8proc_uint8_t *nfc = NULL;
    utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)(l.data ? l.data : ""), (utf8proc_ssize_t)l.len, &nfc,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (m >= 0) lilac_buf_append(out, nfc, (size_t)m);
    free(nfc);
    lilac_buf_free(&l);
}

static int roundtrip_ok(lilac_tokenizer *t, const char *s, size_t n) {
    lilac_ids ids = LILAC_IDS_INIT;
    lilac_buf got = LILAC_BUF_INIT, want = LILAC_BUF_INIT;
    lilac_error e = {0};
    int ok = lilac_tokenizer_encode(t, s, n, 0, &ids, &e) == LILAC_OK &&
             lilac_tokenizer_decode(t, ids.v, ids.len, 0, &got, &e) == LILAC_OK;
    nfc_lossy(s, n, &want);
    ok = ok && got.len == want.len && memcmp(got.data ? got.data : "", want.data ? want.data : "", got.len) == 0;
    lilac_ids_free(&ids);
    lilac_buf_free(&got);
    lilac_buf_free(&want);
    return ok;
}

/* decode(encode(x)) == NFC(lossy(x)) for every golden text and for random
 * byte strings (mostly invalid UTF-8), which must never crash. */
static void test_roundtrip(void) {
    lilac_tokenizer *ts[] = {qwen3, tiny};
    const char *golden[] = {"tests/fixtures/tokenizer/golden_qwen3.json", "tests/fixtures/tokenizer/golden_tiny.json"};
    for (int k = 0; k < 2; k++) {
        if (!ts[k]) continue;
        json_t *g = load_json(golden[k]);
        size_t fails = 0;
        for (size_t i = 0; i < json_array_size(g); i++) {
            size_t len;
            char *text = entry_bytes(json_array_get(g, i), &len);
            if (!roundtrip_ok(ts[k], text, len)) fails++;
            free(text);
        }
        CHECK(fails == 0, "%s: %zu texts do not round-trip to NFC(text)", golden[k], fails);
        json_decref(g);
        /* random bytes, biased towards UTF-8 lead and continuation bytes */
        static const unsigned char pool[] = {'a', 'b', ' ', '\n', '\'', 's', '<', '|', '>', 0x80, 0xBF, 0xC3, 0xA9,
                                             0xE4, 0xB8, 0xAD, 0xF0, 0x9F, 0x98, 0x8A, 0xED, 0xA0, 0xFF, 0xC0,
                                             0xCC, 0x81, 0xE0, 0xF4, 0x90, 0x00};
        fails = 0;
        for (int r = 0; r < 3000; r++) {
            char buf[64];
            size_t n = rnd() % sizeof buf;
            for (size_t i = 0; i < n; i++)
                buf[i] = (char)(rnd() % 4 == 0 ? (unsigned char)rnd() : pool[rnd() % sizeof pool]);
            if (!roundtrip_ok(ts[k], buf, n)) fails++;
        }
        CHECK(fails == 0, "%zu random byte strings do not round-trip", fails);
    }
}

/* Long runs: one pre-token of a megabyte (BPE heap), a megabyte of spaces
 * (regex backtracking, JIT stack fallback), many added tokens. */
static void test_long_inputs(void) {
    if (!qwen3) return;
    size_t n = 1 << 20;
    char *s = malloc(n);
    const char fills[] = {'a', ' ', '\n', '7', '!'};
    for (size_t f = 0; f < sizeof fills; f++) {
        memset(s, fills[f], n);
        CHECK(roundtrip_ok(qwen3, s, n), "1 MiB of '%c' does not round-trip", fills[f]);
    }
    for (size_t i = 0; i < n; i++) s[i] = "<|im_end|>"[i % 10];
    CHECK(roundtrip_ok(qwen3, s, n), "a run of added tokens does not round-trip");
    lilac_ids ids = LILAC_IDS_INIT;
    lilac_error e = {0};
    lilac_tokenizer_encode(qwen3, s, n, 0, &ids, &e);
    size_t count = 0;
    for (size_t i = 0; i < ids.len; i++) count += ids.v[i] == 151645;
    CHECK(count == n / 10, "%zu <|im_end|> ids for %zu in the text", count, n / 10);
    lilac_ids_free(&ids);
    free(s);
}

/* ---- streaming ---------------------------------------------------------- */

/* Every chunk the stream emits is valid UTF-8 on its own, and all chunks
 * together equal decode() of all ids, however the ids are pushed. */
static void test_stream_decoder(void) {
    lilac_tokenizer *ts[] = {qwen3, tiny};
    const char *golden[] = {"tests/fixtures/tokenizer/golden_qwen3.json", "tests/fixtures/tokenizer/golden_tiny.json"};
    for (int k = 0; k < 2; k++) {
        if (!ts[k]) continue;
        json_t *g = load_json(golden[k]);
        size_t partial = 0, differ = 0;
        for (size_t i = 0; i < json_array_size(g); i++) {
            const json_t *jids = json_object_get(json_array_get(g, i), "ids");
            size_t n = json_array_size(jids);
            int32_t *ids = malloc((n + 1) * sizeof *ids);
            for (size_t j = 0; j < n; j++) ids[j] = (int32_t)json_integer_value(json_array_get(jids, j));
            lilac_buf whole = LILAC_BUF_INIT, streamed = LILAC_BUF_INIT, chunk = LILAC_BUF_INIT;
            lilac_error e = {0};
            lilac_tokenizer_decode(ts[k], ids, n, 0, &whole, &e);
            lilac_tok_stream s;
            lilac_tok_stream_init(&s, ts[k], 0);
            for (size_t j = 0; j < n; j++) {
                lilac_buf_clear(&chunk);
                lilac_tok_stream_push(&s, ids[j], &chunk, &e);
                if (lilac_utf8_valid_prefix(chunk.data, chunk.len) != chunk.len) partial++;
                lilac_buf_append(&streamed, chunk.data, chunk.len);
            }
            lilac_buf_clear(&chunk);
            lilac_tok_stream_finish(&s, &chunk);
            if (lilac_utf8_valid_prefix(chunk.data, chunk.len) != chunk.len) partial++;
            lilac_buf_append(&streamed, chunk.data, chunk.len);
            if (streamed.len != whole.len || (whole.len && memcmp(streamed.data, whole.data, whole.len))) differ++;
            /* the same bytes pushed raw, in random slices */
            lilac_buf bytes = LILAC_BUF_INIT, again = LILAC_BUF_INIT;
            for (size_t j = 0; j < n; j++) {
                size_t len;
                const char *p = lilac_tokenizer_token(ts[k], ids[j], &len);
                lilac_buf_append(&bytes, p, len);
            }
            lilac_tok_stream_init(&s, ts[k], 0);
            for (size_t at = 0; at < bytes.len;) {
                size_t step = 1 + rnd() % 5;
                if (step > bytes.len - at) step = bytes.len - at;
                lilac_buf_clear(&chunk);
                lilac_tok_stream_push_bytes(&s, bytes.data + at, step, &chunk);
                if (lilac_utf8_valid_prefix(chunk.data, chunk.len) != chunk.len) partial++;
                lilac_buf_append(&again, chunk.data, chunk.len);
                at += step;
            }
            lilac_tok_stream_finish(&s, &again);
            if (again.len != whole.len || (whole.len && memcmp(again.data, whole.data, whole.len))) differ++;
            lilac_buf_free(&bytes);
            lilac_buf_free(&again);
            lilac_buf_free(&whole);
            lilac_buf_free(&streamed);
            lilac_buf_free(&chunk);
            free(ids);
        }
        CHECK(partial == 0, "%s: %zu chunks held a partial UTF-8 sequence", golden[k], partial);
        CHECK(differ == 0, "%s: %zu streams differ from decode()", golden[k], differ);
        json_decref(g);
    }
}

/* The UTF-8 assembler by itself: hand-made cases and random splits. */
static void test_utf8_stream(void) {
    struct {
        const char *in;
        size_t n;
        const char *want;
    } cases[] = {
        {"\xe4\xb8\xad", 3, "\xe4\xb8\xad"},
        {"\xe4\xb8", 2, "\xef\xbf\xbd"},                 /* unfinished at the end: one U+FFFD */
        {"\xe4\xb8" "A", 3, "\xef\xbf\xbd" "A"},         /* broken by a new character */
        {"\xf0\x80\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* overlong: each byte */
        {"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* surrogate */
        {"\xf4\x8f\xbf\xbf", 4, "\xf4\x8f\xbf\xbf"},     /* U+10FFFF */
        {"a\xc3\xc3\xa9", 4, "a\xef\xbf\xbd\xc3\xa9"},
        {"\xf0\x9f\x98\x8a", 4, "\xf0\x9f\x98\x8a"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int trial = 0; trial < 20; trial++) {
            lilac_utf8_stream s = LILAC_UTF8_STREAM_INIT;
            lilac_buf out = LILAC_BUF_INIT;
            for (size_t at = 0; at < cases[c].n;) {
                size_t step = trial == 0 ? 1 : 1 + rnd() % 3;
                if (step > cases[c].n - at) step = cases[c].n - at;
                size_t before = out.len;
                lilac_utf8_stream_push(&s, cases[c].in + at, step, &out);
                CHECK(lilac_utf8_valid_prefix(out.data + before, out.len - before) == out.len - before,
                      "case %zu: partial sequence emitted", c);
                at += step;
            }
            lilac_utf8_stream_finish(&s, &out);
            CHECK(out.len == strlen(cases[c].want) && memcmp(out.data, cases[c].want, out.len) == 0,
                  "case %zu (trial %d): stream gives a different text", c, trial);
            lilac_buf_free(&out);
        }
    }
}

/* ---- API ---------------------------------------------------------------- */

static void test_api(void) {
    if (!qwen3 || !tiny || !flags) return;
    CHECK(lilac_tokenizer_n_ids(qwen3) == 151669, "qwen3 n_ids %d", lilac_tokenizer_n_ids(qwen3));
    CHECK(lilac_tokenizer_n_ids(tiny) == 512, "tiny n_ids %d", lilac_tokenizer_n_ids(tiny));
    CHECK(lilac_tokenizer_id(qwen3, "<|im_end|>") == 151645, "<|im_end|>");
    CHECK(lilac_tokenizer_id(qwen3, "<think>") == 151667, "<think>");
    CHECK(lilac_tokenizer_id(qwen3, " the") == 279, "' the' is %d", lilac_tokenizer_id(qwen3, " the"));
    CHECK(lilac_tokenizer_id(qwen3, "\n") == 198, "newline");
    CHECK(lilac_tokenizer_id(qwen3, "<|nope|>") == -1, "absent token");
    CHECK(lilac_tokenizer_id(tiny, "<|im_start|>") == 480, "tiny <|im_start|>");
    CHECK(lilac_tokenizer_find(qwen3, "\0", 1) >= 0, "the NUL byte is a token");
    size_t len = 0;
    const char *p = lilac_tokenizer_token(qwen3, 151645, &len);
    CHECK(p && len == 10 && memcmp(p, "<|im_end|>", 10) == 0, "token 151645");
    p = lilac_tokenizer_token(qwen3, 220, &len);
    CHECK(p && len == 1 && p[0] == ' ', "token 220 is a space");
    p = lilac_tokenizer_token(qwen3, 26525, &len); /* "ĠðŁĺ" = " \xf0\x9f\x98" */
    CHECK(p && len == 4 && memcmp(p, " \xf0\x9f\x98", 4) == 0, "token 26525 is raw bytes");
    CHECK(!lilac_tokenizer_token(qwen3, -1, &len) && !lilac_tokenizer_token(qwen3, 151669, &len), "out of range");
    CHECK(lilac_tokenizer_is_added(qwen3, 151644) && lilac_tokenizer_is_special(qwen3, 151644), "<|im_start|> special");
    CHECK(lilac_tokenizer_is_added(qwen3, 151667) && !lilac_tokenizer_is_special(qwen3, 151667), "<think> not special");
    CHECK(!lilac_tokenizer_is_added(qwen3, 279) && !lilac_tokenizer_is_special(qwen3, 279), "' the' is not added");
    /* the config-only token of the flags fixture */
    int32_t cfg = lilac_tokenizer_id(flags, "<|cfg_only|>");
    CHECK(cfg == lilac_tokenizer_n_ids(flags) - 1 && lilac_tokenizer_is_special(flags, cfg), "config-only token %d",
          cfg);
    /* added tokens decode to their content, even where HF's ByteLevel pass
     * would turn "\u00c5" (a byte-alphabet character) into the byte 0xC5 */
    int32_t ang = lilac_tokenizer_id(flags, "\xc3\x85ng");
    lilac_buf text = LILAC_BUF_INIT;
    lilac_error e0 = {0};
    CHECK(ang > 0 && lilac_tokenizer_decode(flags, &ang, 1, 0, &text, &e0) == LILAC_OK &&
              strcmp(text.data, "\xc3\x85ng") == 0,
          "added token decodes to its content");
    lilac_buf_free(&text);

    /* decode errors and flags */
    lilac_buf out = LILAC_BUF_INIT;
    lilac_error e = {0};
    int32_t bad[] = {9707, 151669};
    CHECK(lilac_tokenizer_decode(qwen3, bad, 2, 0, &out, &e) == LILAC_EINVAL && out.len == 0, "bad id decodes");
    CHECK(strstr(e.msg, "151669") != NULL, "message names the id: %s", e.msg);
    int32_t neg[] = {-5};
    CHECK(lilac_tokenizer_decode(qwen3, neg, 1, 0, &out, &e) == LILAC_EINVAL, "negative id decodes");
    int32_t chat[] = {151644, 872, 198, 9707, 151645};
    lilac_buf_clear(&out);
    CHECK(lilac_tokenizer_decode(qwen3, chat, 5, 0, &out, &e) == LILAC_OK &&
              strcmp(out.data, "<|im_start|>user\nHello<|im_end|>") == 0,
          "decode: '%s'", out.data);
    lilac_buf_clear(&out);
    CHECK(lilac_tokenizer_decode(qwen3, chat, 5, LILAC_TOK_SKIP_SPECIAL, &out, &e) == LILAC_OK &&
              strcmp(out.data, "user\nHello") == 0,
          "skip special: '%s'", out.data);
    lilac_buf_free(&out);
    lilac_tok_stream s;
    lilac_tok_stream_init(&s, qwen3, 0);
    CHECK(lilac_tok_stream_push(&s, 1 << 30, &out, &e) == LILAC_EINVAL, "stream rejects bad ids");
    lilac_buf_free(&out);

    /* encode appends; empty text adds nothing */
    lilac_ids ids = LILAC_IDS_INIT;
    lilac_tokenizer_encode(qwen3, "", 0, 0, &ids, &e);
    CHECK(ids.len == 0, "empty text gives %zu ids", ids.len);
    lilac_tokenizer_encode(qwen3, "Hello", 5, 0, &ids, &e);
    lilac_tokenizer_encode(qwen3, "<|im_end|>", 10, 0, &ids, &e);
    CHECK(ids.len == 2 && ids.v[0] == 9707 && ids.v[1] == 151645, "appending encodes");
    lilac_ids_free(&ids);
    lilac_ids_free(&ids); /* twice is harmless */
}

/* ---- bad files ---------------------------------------------------------- */

static char tmpdir[64];

static void write_file(const char *name, const void *p, size_t n) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(p, 1, n, f);
        fclose(f);
    }
}

/* Loads tmpdir/tokenizer.json; expects failure with code and a message
 * containing want. */
static void expect_fail(const char *what, lilac_status code, const char *want) {
    char path[256];
    snprintf(path, sizeof path, "%s/tokenizer.json", tmpdir);
    lilac_tokenizer *t = NULL;
    lilac_error e = {0};
    lilac_status st = lilac_tokenizer_load_files(path, NULL, &t, &e);
    CHECK(st == code && t == NULL, "%s: status %d (%s), want %d", what, st, e.msg, code);
    CHECK(strstr(e.msg, want) != NULL, "%s: message '%s' lacks '%s'", what, e.msg, want);
    lilac_tokenizer_free(t);
}

/* Replaces the first occurrence of from in base by to, writes it as
 * tmpdir/tokenizer.json. */
static void write_variant(const char *base, size_t n, const char *from, const char *to) {
    const char *at = strstr(base, from);
    CHECK(at != NULL, "fixture lacks '%s'", from);
    if (!at) return;
    lilac_buf b = LILAC_BUF_INIT;
    lilac_buf_append(&b, base, (size_t)(at - base));
    lilac_buf_puts(&b, to);
    size_t rest = (size_t)(at - base) + strlen(from);
    lilac_buf_append(&b, base + rest, n - rest);
    write_file("tokenizer.json", b.data, b.len);
    lilac_buf_free(&b);
}

static void test_bad_files(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lilac_tok_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        CHECK(0, "mkdtemp failed");
        return;
    }
    char *base = NULL;
    size_t n = 0;
    lilac_error e = {0};
    CHECK(lilac_read_file(TINY "/tokenizer.json", 1 << 20, &base, &n, &e) == LILAC_OK, "%s", e.msg);
    if (!base) return;

    lilac_tokenizer *t = NULL;
    CHECK(lilac_tokenizer_load("/nonexistent/dir", &t, &e) == LILAC_EIO && strstr(e.msg, "tokenizer.json"),
          "missing: %s", e.msg);
    write_file("tokenizer.json", "", 0);
    expect_fail("empty", LILAC_EFORMAT, "empty");
    write_file("tokenizer.json", base, n / 2);
    expect_fail("truncated", LILAC_EFORMAT, "truncated");
    write_file("tokenizer.json", "{\"model\": {\"vocab\": {\"a\": 0,}}}", 31);
    expect_fail("bad JSON", LILAC_EFORMAT, "line 1");
    write_file("tokenizer.json", "[1, 2]", 6);
    expect_fail("not an object", LILAC_EFORMAT, "object");
    write_file("tokenizer.json", "{\"version\": \"1.0\"}", 18);
    expect_fail("no model", LILAC_EFORMAT, "no \"model\"");
    write_variant(base, n, "\"vocab\"", "\"vocab_x\"");
    expect_fail("no vocab", LILAC_EFORMAT, "no vocab");
    write_variant(base, n, "\"merges\"", "\"merges_x\"");
    expect_fail("no merges", LILAC_EFORMAT, "no merges");
    write_variant(base, n, "\"type\": \"BPE\"", "\"type\": \"WordPiece\"");
    expect_fail("model type", LILAC_EUNSUPPORTED, "WordPiece");
    write_variant(base, n, "\"type\": \"NFC\"", "\"type\": \"NFKC\"");
    expect_fail("normalizer", LILAC_EUNSUPPORTED, "NFKC");
    write_variant(base, n, "\"type\": \"Sequence\"", "\"type\": \"Whitespace\"");
    expect_fail("pre-tokenizer", LILAC_EUNSUPPORTED, "Whitespace");
    write_variant(base, n, "\"Isolated\"", "\"Removed\"");
    expect_fail("split behavior", LILAC_EUNSUPPORTED, "Removed");
    write_variant(base, n, "\"Regex\": \"", "\"Regex\": \"(?<");
    expect_fail("bad regex", LILAC_EFORMAT, "regex");
    write_variant(base, n, "\"use_regex\": false", "\"use_regex\": true");
    expect_fail("ByteLevel use_regex", LILAC_EUNSUPPORTED, "use_regex");
    write_variant(base, n, "\"decoder\": {\n    \"type\": \"ByteLevel\"",
                  "\"decoder\": {\n    \"type\": \"WordPiece\"");
    expect_fail("decoder", LILAC_EUNSUPPORTED, "decoder");
    write_variant(base, n, "\"dropout\": null", "\"dropout\": 0.1");
    expect_fail("dropout", LILAC_EUNSUPPORTED, "dropout");
    write_variant(base, n, "\"byte_fallback\": false", "\"byte_fallback\": true");
    expect_fail("byte_fallback", LILAC_EUNSUPPORTED, "byte_fallback");
    write_variant(base, n, "\"!\": 0,", "\"!\": 1,");
    expect_fail("duplicate id", LILAC_EFORMAT, "id 1 is given to both");
    write_variant(base, n, "\"\\\"\": 1,", "\"!\": 1,");
    expect_fail("duplicate token", LILAC_EFORMAT, "same token");
    write_variant(base, n, "\"!\": 0,", "\"!\": -1,");
    expect_fail("negative id", LILAC_EFORMAT, "out of range");
    write_variant(base, n, "[\n        \"Ġ\",\n        \"Ġ\"\n      ]",
                  "[\n        \"Ġ\",\n        \"Q\\u00e9\"\n      ]");
    expect_fail("merge of an unknown token", LILAC_EFORMAT, "not in the vocab");
    write_variant(base, n, "[\n        \"Ġ\",\n        \"Ġ\"\n      ]", "[\n        \"Ġ\",\n        \"!\"\n      ]");
    expect_fail("merge result unknown", LILAC_EFORMAT, "makes a token");
    write_variant(base, n, "[\n        \"Ġ\",\n        \"Ġ\"\n      ]", "[\n        \"Ġ\"\n      ]");
    expect_fail("merge not a pair", LILAC_EFORMAT, "pair");
    write_variant(base, n, "[\n        \"Ġ\",\n        \"Ġ\"\n      ]", "\"Ġ Ġ Ġ\"");
    expect_fail("merge string with two spaces", LILAC_EFORMAT, "one space");
    write_variant(base, n, "\"!\": 0,", "\"\\uZZ\": 0,");
    expect_fail("bad escape", LILAC_EFORMAT, "escape");
    write_variant(base, n, "\"!\": 0,", "\"\xff\": 0,");
    expect_fail("invalid UTF-8", LILAC_EFORMAT, "UTF-8");
    write_variant(base, n, "\"version\"", "\"version\" \"x\"");
    expect_fail("missing colon", LILAC_EFORMAT, "expected ':'");
    write_variant(base, n, "\"id\": 511", "\"id\": 100");
    expect_fail("added token over a vocab token", LILAC_EUNSUPPORTED, "takes id 100");
    lilac_buf b = LILAC_BUF_INIT;
    lilac_buf_append(&b, base, n);
    lilac_buf_puts(&b, " {}");
    write_file("tokenizer.json", b.data, b.len);
    lilac_buf_free(&b);
    expect_fail("trailing data", LILAC_EFORMAT, "after the JSON");

    /* tokenizer_config.json problems */
    write_file("tokenizer.json", base, n);
    char jpath[256], cpath[256];
    snprintf(jpath, sizeof jpath, "%s/tokenizer.json", tmpdir);
    snprintf(cpath, sizeof cpath, "%s/tokenizer_config.json", tmpdir);
    const char *cfgs[][2] = {
        {"{\"added_tokens_decoder\": {\"479\": {\"content\": \"<|other|>\"}}}", "is '<|other|>' here"},
        {"{\"added_tokens_decoder\": {\"600\": {\"content\": \"<|im_end|>\"}}}", "has id 600 here"},
        {"{\"added_tokens_decoder\": {\"x\": {\"content\": \"<|a|>\"}}}", "not an integer"},
        {"{\"added_tokens_decoder\": {\"600\": 5}}", "content"},
        {"{\"added_tokens_decoder\": [", "line 1"},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        write_file("tokenizer_config.json", cfgs[i][0], strlen(cfgs[i][0]));
        t = NULL;
        lilac_status st = lilac_tokenizer_load_files(jpath, cpath, &t, &e);
        CHECK(st == LILAC_EFORMAT && !t && strstr(e.msg, cfgs[i][1]), "config %zu: %d '%s'", i, st, e.msg);
        lilac_tokenizer_free(t);
    }
    /* the same directory loads once the config is fine */
    write_file("tokenizer_config.json", "{}", 2);
    t = NULL;
    CHECK(lilac_tokenizer_load(tmpdir, &t, &e) == LILAC_OK, "good copy: %s", e.msg);
    lilac_tokenizer_free(t);

    /* every truncation point fails cleanly (ASan checks the "never crash") */
    size_t fails = 0;
    for (size_t cut = 0; cut < n; cut += 1 + cut / 64) {
        write_file("tokenizer.json", base, cut);
        t = NULL;
        if (lilac_tokenizer_load_files(jpath, NULL, &t, &e) != LILAC_EFORMAT || t) fails++;
        lilac_tokenizer_free(t);
    }
    CHECK(fails == 0, "%zu truncations did not fail with a format error", fails);
    /* random byte flips: any status is fine, a crash is not */
    for (int r = 0; r < 200; r++) {
        char *copy = malloc(n);
        memcpy(copy, base, n);
        for (int k = 0; k < 4; k++) copy[rnd() % n] = (char)rnd();
        write_file("tokenizer.json", copy, n);
        t = NULL;
        if (lilac_tokenizer_load_files(jpath, NULL, &t, &e) == LILAC_OK) {
            lilac_ids ids = LILAC_IDS_INIT;
            lilac_tokenizer_encode(t, "Hello <|im_end|> wörld", 23, 0, &ids, &e);
            lilac_ids_free(&ids);
        }
        lilac_tokenizer_free(t);
        free(copy);
    }
    free(base);
    char path[256];
    snprintf(path, sizeof path, "%s/tokenizer.json", tmpdir);
    unlink(path);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", tmpdir);
    unlink(path);
    rmdir(tmpdir);
}

/* ---- threads ------------------------------------------------------------ */

typedef struct {
    lilac_tokenizer *t;
    json_t *golden;
    int offset;
    size_t bad;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    size_t n = json_array_size(w->golden);
    for (int round = 0; round < 3; round++)
        for (size_t k = 0; k < n; k++) {
            const json_t *o = json_array_get(w->golden, (k + (size_t)w->offset * 37) % n);
            size_t len;
            char *text = entry_bytes(o, &len);
            lilac_ids ids = LILAC_IDS_INIT;
            lilac_error e = {0};
            int split = json_is_true(json_object_get(o, "split_special"));
            if (lilac_tokenizer_encode(w->t, text, len, split ? LILAC_TOK_SPLIT_SPECIAL : 0, &ids, &e) ||
                !ids_equal(&ids, json_object_get(o, "ids")))
                w->bad++;
            lilac_ids_free(&ids);
            free(text);
        }
    return NULL;
}

/* Several threads encode on one tokenizer at once (sharing its word cache). */
static void test_concurrent_encode(void) {
    if (!qwen3) return;
    json_t *g = load_json("tests/fixtures/tokenizer/golden_qwen3.json");
    if (!g) return;
    enum { NT = 4 };
    pthread_t th[NT];
    worker w[NT];
    for (int i = 0; i < NT; i++) {
        w[i] = (worker){qwen3, g, i, 0};
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    size_t bad = 0;
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        bad += w[i].bad;
    }
    CHECK(bad == 0, "%zu encodes went wrong under concurrency", bad);
    json_decref(g);
}

/* ---- the real Qwen3.5/3.6 vocabulary (when available) ------------------ */

static void test_qwen36_vectors(void) {
    const char *where = getenv("LILAC_QWEN36_TOKENIZER");
    if (!where || !*where) {
        SKIP("LILAC_QWEN36_TOKENIZER is not set (the Qwen3.6 tokenizer.json is not available offline)");
        return;
    }
    struct stat st;
    lilac_tokenizer *t = NULL;
    lilac_error e = {0};
    lilac_status s;
    if (stat(where, &st) == 0 && S_ISDIR(st.st_mode)) s = lilac_tokenizer_load(where, &t, &e);
    else s = lilac_tokenizer_load_files(where, NULL, &t, &e);
    CHECK(s == LILAC_OK, "loading %s: %s", where, e.msg);
    if (!t) return;
    json_t *v = load_json("tests/fixtures/tokenizer/qwen35_test_vectors.json");
    json_t *list = json_object_get(v, "qwen35_vocab");
    CHECK(json_array_size(list) > 0, "no vectors");
    lilac_buf tmp = LILAC_BUF_INIT;
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *o = json_array_get(list, i);
        size_t len = json_string_length(json_object_get(o, "text"));
        const char *text = json_string_value(json_object_get(o, "text"));
        int split = json_is_false(json_object_get(o, "parse_special"));
        lilac_ids ids = LILAC_IDS_INIT;
        lilac_tokenizer_encode(t, text, len, split ? LILAC_TOK_SPLIT_SPECIAL : 0, &ids, &e);
        int ok = ids_equal(&ids, json_object_get(o, "ids"));
        CHECK(ok, "qwen35 vector %zu: ids differ", i);
        if (!ok) print_ids("ids", &ids, json_object_get(o, "ids"));
        lilac_ids_free(&ids);
    }
    CHECK(lilac_tokenizer_id(t, "<|im_end|>") == 248046, "<|im_end|> is %d", lilac_tokenizer_id(t, "<|im_end|>"));
    CHECK(lilac_tokenizer_id(t, "<think>") == 248068, "<think>");
    lilac_buf_free(&tmp);
    json_decref(v);
    lilac_tokenizer_free(t);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    qwen3 = load_dir(QWEN3);
    tiny = load_dir(TINY);
    flags = load_dir(FLAGS);
    RUN(test_utf8_stream);
    RUN(test_hf_dev_golden);
    RUN(test_hf_golden_qwen3);
    RUN(test_hf_golden_tiny);
    RUN(test_hf_golden_added_flags);
    RUN(test_merge_forms_agree);
    RUN(test_api);
    RUN(test_roundtrip);
    RUN(test_long_inputs);
    RUN(test_stream_decoder);
    RUN(test_bad_files);
    RUN(test_concurrent_encode);
    RUN(test_qwen36_vectors);
    lilac_tokenizer_free(qwen3);
    lilac_tokenizer_free(tiny);
    lilac_tokenizer_free(flags);
    return check_done("tokenizer");
}
