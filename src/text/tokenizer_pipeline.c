/* tokenizer_pipeline.c — the text pipeline around the BPE model, read from
 * tokenizer.json: normalizer, pre-tokenizer (the Split regex, compiled with
 * PCRE2), post-processor and decoder, plus the character classes the
 * added-token flags need.
 *
 * Supported: normalizer null, NFC or a Sequence of NFC; pre_tokenizer
 * ByteLevel(use_regex=false, add_prefix_space=false), optionally after one
 * Split (Regex or String pattern, behavior Isolated, invert false); decoder
 * ByteLevel; post_processor null or ByteLevel.  Anything else is
 * LILAC_EUNSUPPORTED naming it, rather than a tokenization that differs from
 * Hugging Face's. */
#include <string.h>

#include "text/tokenizer_impl.h"

typedef struct {
    lilac_tokenizer *t;
    const char *path;
    lilac_error *e;
} loader;

static const char *jtype(const json_t *o) {
    const char *s = json_string_value(json_object_get(o, "type"));
    return s ? s : "(no type)";
}

static lilac_status parse_normalizer(loader *L, const json_t *n) {
    if (!n || json_is_null(n)) return LILAC_OK;
    if (strcmp(jtype(n), "NFC") == 0) {
        L->t->nfc = 1;
        return LILAC_OK;
    }
    if (strcmp(jtype(n), "Sequence") == 0) {
        const json_t *list = json_object_get(n, "normalizers");
        for (size_t i = 0; i < json_array_size(list); i++) {
            lilac_status st = parse_normalizer(L, json_array_get(list, i));
            if (st) return st;
        }
        if (json_is_array(list)) return LILAC_OK;
    }
    return lilac_fail(L->e, LILAC_EUNSUPPORTED, "%s: normalizer '%s' is not supported (only NFC)", L->path, jtype(n));
}

/* Rewrites a pattern written for Oniguruma (what HF tokenizers runs) so that
 * PCRE2 reads it the same way: Oniguruma's \s is Unicode White_Space (it
 * includes U+0085 and excludes U+001C..U+001F) and its \w is
 * Letter|Mark|Decimal_Number|Connector_Punctuation. */
static lilac_status onig_to_pcre2(const char *p, size_t n, lilac_buf *out) {
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char d = p[i + 1];
            i++;
            if (d == 's')
                lilac_buf_puts(out, "\\p{White_Space}");
            else if (d == 'S')
                lilac_buf_puts(out, "\\P{White_Space}");
            else if (d == 'w')
                lilac_buf_puts(out, in_class ? "\\p{L}\\p{M}\\p{Nd}\\p{Pc}" : "[\\p{L}\\p{M}\\p{Nd}\\p{Pc}]");
            else if (d == 'W' && !in_class)
                lilac_buf_puts(out, "[^\\p{L}\\p{M}\\p{Nd}\\p{Pc}]");
            else if (d == 'Q') { /* \Q...\E is literal: copy it untouched */
                const char *end = NULL;
                for (size_t k = i + 1; k + 1 < n; k++)
                    if (p[k] == '\\' && p[k + 1] == 'E') {
                        end = p + k;
                        break;
                    }
                size_t stop = end ? (size_t)(end - p) + 2 : n;
                lilac_buf_append(out, p + i - 1, stop - (i - 1));
                i = stop - 1;
            } else {
                lilac_buf_putc(out, '\\');
                lilac_buf_putc(out, d);
            }
            continue;
        }
        if (!in_class && c == '[') {
            in_class = 1;
            lilac_buf_putc(out, c);
            if (i + 1 < n && p[i + 1] == '^') lilac_buf_putc(out, p[++i]);
            if (i + 1 < n && p[i + 1] == ']') lilac_buf_putc(out, p[++i]); /* literal ] first */
            continue;
        }
        if (in_class && c == '[' && i + 1 < n && p[i + 1] == ':') { /* [:alpha:] */
            const char *end = strstr(p + i, ":]");
            size_t stop = end && (size_t)(end - p) < n ? (size_t)(end - p) + 2 : n;
            lilac_buf_append(out, p + i, stop - i);
            i = stop - 1;
            continue;
        }
        if (in_class && c == ']') in_class = 0;
        lilac_buf_putc(out, c);
    }
    return out->oom ? LILAC_ENOMEM : LILAC_OK;
}

static lilac_status compile(loader *L, const char *what, const char *pat, size_t n, uint32_t opts, pcre2_code **out) {
    int err;
    PCRE2_SIZE off;
    *out = pcre2_compile((PCRE2_SPTR)pat, n, PCRE2_UTF | PCRE2_UCP | opts, &err, &off, NULL);
    if (!*out) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return lilac_fail(L->e, LILAC_EFORMAT, "%s: %s: regex error at offset %zu: %s", L->path, what, (size_t)off,
                          (const char *)msg);
    }
    return LILAC_OK;
}

static lilac_status parse_split(loader *L, const json_t *sp) {
    const char *beh = json_string_value(json_object_get(sp, "behavior"));
    if (!beh || strcmp(beh, "Isolated") != 0)
        return lilac_fail(L->e, LILAC_EUNSUPPORTED,
                          "%s: pre_tokenizer Split behavior '%s' is not supported (only Isolated)", L->path,
                          beh ? beh : "(none)");
    if (json_is_true(json_object_get(sp, "invert")))
        return lilac_fail(L->e, LILAC_EUNSUPPORTED, "%s: pre_tokenizer Split invert=true is not supported", L->path);
    if (L->t->split)
        return lilac_fail(L->e, LILAC_EUNSUPPORTED, "%s: more than one Split pre-tokenizer is not supported", L->path);
    const json_t *pat = json_object_get(sp, "pattern");
    const json_t *re = json_object_get(pat, "Regex"), *lit = json_object_get(pat, "String");
    lilac_status st;
    if (json_is_string(re)) {
        lilac_buf b = LILAC_BUF_INIT;
        st = onig_to_pcre2(json_string_value(re), json_string_length(re), &b);
        if (st == LILAC_OK) /* Oniguruma's Ruby syntax: ^ and $ are line anchors */
            st = compile(L, "pre_tokenizer Split pattern", b.data ? b.data : "", b.len, PCRE2_MULTILINE, &L->t->split);
        lilac_buf_free(&b);
    } else if (json_is_string(lit)) {
        if (json_string_length(lit) == 0)
            return lilac_fail(L->e, LILAC_EFORMAT, "%s: pre_tokenizer Split pattern is empty", L->path);
        st = compile(L, "pre_tokenizer Split pattern", json_string_value(lit), json_string_length(lit), PCRE2_LITERAL,
                     &L->t->split);
    } else {
        return lilac_fail(L->e, LILAC_EFORMAT,
                          "%s: pre_tokenizer Split needs pattern {\"Regex\": ...} or {\"String\": ...}", L->path);
    }
    if (st) return st;
    /* JIT is an optimisation only: where it is unavailable pcre2_match
     * interprets the pattern, with the same results. */
    pcre2_jit_compile(L->t->split, PCRE2_JIT_COMPLETE);
    return LILAC_OK;
}

static lilac_status check_bytelevel(loader *L, const json_t *b) {
    if (json_is_true(json_object_get(b, "add_prefix_space")))
        return lilac_fail(L->e, LILAC_EUNSUPPORTED,
                          "%s: pre_tokenizer ByteLevel add_prefix_space=true is not supported", L->path);
    if (json_is_true(json_object_get(b, "use_regex")))
        return lilac_fail(L->e, LILAC_EUNSUPPORTED,
                          "%s: pre_tokenizer ByteLevel use_regex=true (its built-in regex) is not supported; "
                          "only an explicit Split regex is",
                          L->path);
    return LILAC_OK;
}

static lilac_status parse_pretok(loader *L, const json_t *p) {
    if (!p || json_is_null(p))
        return lilac_fail(L->e, LILAC_EUNSUPPORTED, "%s: no pre_tokenizer (a byte-level BPE needs ByteLevel)", L->path);
    const char *type = jtype(p);
    if (strcmp(type, "ByteLevel") == 0) return check_bytelevel(L, p);
    if (strcmp(type, "Sequence") != 0)
        return lilac_fail(L->e, LILAC_EUNSUPPORTED, "%s: pre_tokenizer '%s' is not supported", L->path, type);
    const json_t *list = json_object_get(p, "pretokenizers");
    size_t n = json_array_size(list);
    int bytelevel = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_array_get(list, i);
        const char *st = jtype(s);
        lilac_status r;
        if (strcmp(st, "Split") == 0 && !bytelevel)
            r = parse_split(L, s);
        else if (strcmp(st, "ByteLevel") == 0 && !bytelevel)
            r = check_bytelevel(L, s), bytelevel = 1;
        else
            r = lilac_fail(L->e, LILAC_EUNSUPPORTED,
                           "%s: pre_tokenizer Sequence item %zu ('%s') is not supported (only Split, then ByteLevel)",
                           L->path, i, st);
        if (r) return r;
    }
    if (!bytelevel) return lilac_fail(L->e, LILAC_EUNSUPPORTED, "%s: pre_tokenizer has no ByteLevel step", L->path);
    return LILAC_OK;
}

static lilac_status parse_decoder(loader *L, const json_t *d) {
    if (d && strcmp(jtype(d), "ByteLevel") == 0) return LILAC_OK;
    return lilac_fail(L->e, LILAC_EUNSUPPORTED, "%s: decoder '%s' is not supported (only ByteLevel)", L->path,
                      d && !json_is_null(d) ? jtype(d) : "null");
}

static lilac_status parse_post(loader *L, const json_t *p) {
    if (!p || json_is_null(p) || strcmp(jtype(p), "ByteLevel") == 0) return LILAC_OK;
    return lilac_fail(L->e, LILAC_EUNSUPPORTED, "%s: post_processor '%s' is not supported (only ByteLevel or null)",
                      L->path, jtype(p));
}

lilac_status lilac_tok_read_pipeline(lilac_tokenizer *t, const char *path, const json_t *normalizer,
                                     const json_t *pre_tokenizer, const json_t *post_processor, const json_t *decoder,
                                     lilac_error *e) {
    loader L = {t, path, e};
    lilac_status st = parse_normalizer(&L, normalizer);
    if (st == LILAC_OK) st = parse_pretok(&L, pre_tokenizer);
    if (st == LILAC_OK) st = parse_post(&L, post_processor);
    if (st == LILAC_OK) st = parse_decoder(&L, decoder);
    return st;
}

lilac_status lilac_tok_word_classes(lilac_tokenizer *t, const char *path, lilac_error *e) {
    loader L = {t, path, e};
    /* Rust regex's \w and \s, which HF uses for single_word and lstrip/rstrip */
    static const char word[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";
    static const char space[] = "\\p{White_Space}";
    lilac_status st = compile(&L, "word class", word, sizeof word - 1, PCRE2_ANCHORED, &t->re_word);
    if (st == LILAC_OK) st = compile(&L, "space class", space, sizeof space - 1, PCRE2_ANCHORED, &t->re_space);
    return st;
}
