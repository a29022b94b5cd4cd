/* pyjson.h — JSON text exactly as Python's json.dumps(x, ensure_ascii=False)
 * writes it.
 *
 * The chat template serialises tools and tool-call arguments with
 * transformers' `tojson` filter, which is json.dumps with ensure_ascii=False:
 * separators ", " and ": ", keys in insertion order, non-ASCII kept as UTF-8,
 * '/' not escaped, floats in Python repr (shortest round-trip, "1.0",
 * "1e+16", "1.5e-05").  A prompt that differs by one byte tokenises
 * differently, so this writer is byte-exact with Python for every value
 * jansson can hold (integers beyond 64 bits cannot be parsed by jansson and
 * are rejected before they get here). */
#ifndef LILAC_TEXT_PYJSON_H
#define LILAC_TEXT_PYJSON_H

#include <jansson.h>

#include "util/buf.h"

/* Appends the serialisation of v to out. */
void lilac_pyjson_dump(const json_t *v, lilac_buf *out);

/* Appends a JSON string literal (quotes included) for the n bytes of s. */
void lilac_pyjson_dump_string(const char *s, size_t n, lilac_buf *out);

/* Appends Python's repr() of a finite or non-finite double. */
void lilac_pyjson_dump_real(double d, lilac_buf *out);

#endif
