/* chat_pystr.h — the few Python `str` operations the chat template uses,
 * with Python's exact semantics, on UTF-8 byte ranges.
 *
 * The Qwen3.6 template trims every message with Jinja `|trim`, which is
 * Python `str.strip()`: it removes every code point for which str.isspace()
 * is true (Unicode White_Space-like set: ASCII \t\n\v\f\r and space, the
 * information separators \x1c-\x1f, U+0085, U+00A0, U+1680, U+2000-U+200A,
 * U+2028, U+2029, U+202F, U+205F, U+3000), not only ASCII blanks.  It also
 * splits reasoning out of content with split()/rstrip('\n')/lstrip('\n').
 * Byte-level search is exact here because UTF-8 is self-synchronising: a
 * valid UTF-8 needle matches only at code point boundaries.
 *
 * Owns: whitespace classification, strip, and split()[0]/[-1].  Nothing
 * allocates; results are views (offset, length) into the caller's bytes. */
#ifndef LILAC_TEXT_CHAT_PYSTR_H
#define LILAC_TEXT_CHAT_PYSTR_H

#include <stddef.h>
#include <stdint.h>

/* A view of bytes inside some other string. */
typedef struct {
    const char *p;
    size_t n;
} lilac_strview;

/* 1 when Python's chr(cp).isspace() is true. */
int lilac_pystr_isspace(uint32_t cp);

/* str.strip(): the view without leading and trailing Unicode whitespace.
 * Bytes that are not valid UTF-8 count as non-whitespace. */
lilac_strview lilac_pystr_strip(lilac_strview s);

/* str.rstrip(ch) / str.lstrip(ch) for a single ASCII character. */
lilac_strview lilac_pystr_rstrip_char(lilac_strview s, char ch);
lilac_strview lilac_pystr_lstrip_char(lilac_strview s, char ch);

/* 1 when needle occurs in s (Python `needle in s`). */
int lilac_pystr_contains(lilac_strview s, const char *needle);
int lilac_pystr_startswith(lilac_strview s, const char *prefix);
int lilac_pystr_endswith(lilac_strview s, const char *suffix);

/* s.split(sep)[0]: the text before the first sep, or s when there is none. */
lilac_strview lilac_pystr_split_first(lilac_strview s, const char *sep);

/* s.split(sep)[-1]: the text after the last of the non-overlapping
 * occurrences found left to right, or s when there is none. */
lilac_strview lilac_pystr_split_last(lilac_strview s, const char *sep);

#endif
