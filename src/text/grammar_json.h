/* grammar_json.h — JSON building blocks for the schema and tool compilers
 * (grammar_json.c; internal to src/text/grammar*.c). */
#ifndef LILAC_TEXT_GRAMMAR_JSON_H
#define LILAC_TEXT_GRAMMAR_JSON_H

#include "text/grammar.h"

void lg_class_digits(lg_class *c, int lo, int hi);
void lg_class_json_char(lg_class *c); /* a string's unescaped characters */
/* c repeated min..max times (max < 0: unbounded). */
int lg_rep_class(lg_grammar *g, const lg_class *c, int min, int max, const char *name);
int lg_json_ws(lg_grammar *g);
int lg_json_string(lg_grammar *g);
/* A string of min..max characters (code points; max < 0: no bound). */
int lg_json_string_len(lg_grammar *g, int min, int max);
int lg_raw_text_len(lg_grammar *g, int min, int max, const lg_class *no_first);
int lg_json_integer(lg_grammar *g);
int lg_json_number(lg_grammar *g);
int lg_json_fraction(lg_grammar *g); /* "." and 1..15 digits */
int lg_json_bool(lg_grammar *g);
int lg_json_null(lg_grammar *g);
int lg_json_any_at(lg_grammar *g, int depth);
/* {"key": value, ...} with any keys / [item, ...] */
int lg_json_map(lg_grammar *g, int value);
int lg_json_array_of(lg_grammar *g, int item);

/* grammar_num.c: integers in [lo, hi] (clamped to 18 digits); numbers whose
 * value is certainly inside the bounds (see there).  -1 with e set when no
 * value can be written. */
int lg_int_range(lg_grammar *g, long long lo, long long hi, lilac_error *e);
int lg_num_range(lg_grammar *g, double lo, int lo_excl, int has_lo, double hi, int hi_excl, int has_hi, lilac_error *e);

/* grammar_format.c: the text of a string format (no quotes), or -1 when
 * the format is not one lilac writes. */
int lg_format(lg_grammar *g, const char *format);

/* grammar_schema.c: the rule for values of schema (found at `path` inside
 * root, which $refs resolve against) restricted by a filter; -1 with e set
 * on an unsupported or bad schema, -2 when no value passes the filter. */
typedef struct {
    unsigned types;    /* LILAC_PT_* (text/parse_schema.h) allowed */
    int raw;           /* tool-call parameter text: strings without quotes or escapes */
    lg_class no_first; /* raw: characters a value may not start with */
} lg_filter;
int lg_schema_rule(lg_grammar *g, const json_t *root, const json_t *schema, const lg_filter *f, const char *where,
                   const char *path, lilac_error *e);
/* Raw parameter text: anything without "</parameter>" (first character not
 * in no_first when given). */
int lg_raw_text(lg_grammar *g, const lg_class *no_first);

#endif
