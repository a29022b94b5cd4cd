/* parse_schema.c — typing tool-call parameter values by JSON schema (see
 * parse_schema.h and the rules in parse.h). */
#include "text/parse_schema.h"

#include <string.h>
#include <strings.h>

int lilac_parse_find_tool(const json_t *tools, const char *name, size_t n, const json_t **props) {
    *props = NULL;
    if (!json_is_array(tools)) return 0;
    for (size_t i = 0; i < json_array_size(tools); i++) {
        const json_t *t = json_array_get(tools, i);
        const json_t *fn = json_object_get(t, "function");
        if (!json_is_object(fn)) fn = t; /* tolerate a bare function object */
        const json_t *nm = json_object_get(fn, "name");
        if (!json_is_string(nm) || json_string_length(nm) != n || memcmp(json_string_value(nm), name, n))
            continue;
        const json_t *pr = json_object_get(json_object_get(fn, "parameters"), "properties");
        *props = json_is_object(pr) ? pr : NULL;
        return 1;
    }
    return 0;
}

/* JSON Schema's type names, plus the loose spellings that hand-written tool
 * definitions use ("int", "float", "bool", "dict", "list"); a prefix match
 * also catches "int64", "uint32", "float32" and the like. */
static unsigned type_bit(const char *s) {
    static const struct {
        const char *prefix;
        unsigned bit;
        int exact;
    } names[] = {
        {"string", LILAC_PT_STRING, 1},  {"str", LILAC_PT_STRING, 1},    {"text", LILAC_PT_STRING, 1},
        {"integer", LILAC_PT_INTEGER, 1}, {"int", LILAC_PT_INTEGER, 0},   {"uint", LILAC_PT_INTEGER, 0},
        {"long", LILAC_PT_INTEGER, 0},   {"number", LILAC_PT_NUMBER, 1}, {"num", LILAC_PT_NUMBER, 0},
        {"float", LILAC_PT_NUMBER, 0},   {"double", LILAC_PT_NUMBER, 0}, {"boolean", LILAC_PT_BOOLEAN, 1},
        {"bool", LILAC_PT_BOOLEAN, 1},   {"null", LILAC_PT_NULL, 1},     {"array", LILAC_PT_ARRAY, 1},
        {"list", LILAC_PT_ARRAY, 0},     {"object", LILAC_PT_OBJECT, 1}, {"dict", LILAC_PT_OBJECT, 0},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t k = strlen(names[i].prefix);
        if (names[i].exact ? strcasecmp(s, names[i].prefix) == 0 : strncasecmp(s, names[i].prefix, k) == 0)
            return names[i].bit;
    }
    return 0;
}

unsigned lilac_json_type(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_STRING: return LILAC_PT_STRING;
    case JSON_INTEGER: return LILAC_PT_INTEGER;
    case JSON_REAL: return LILAC_PT_NUMBER;
    case JSON_TRUE:
    case JSON_FALSE: return LILAC_PT_BOOLEAN;
    case JSON_NULL: return LILAC_PT_NULL;
    case JSON_ARRAY: return LILAC_PT_ARRAY;
    case JSON_OBJECT: return LILAC_PT_OBJECT;
    }
    return 0;
}

/* depth bounds the recursion through nested anyOf/oneOf of a hostile schema. */
static unsigned schema_types(const json_t *schema, int depth) {
    if (!json_is_object(schema) || depth > 8) return 0;
    unsigned bits = 0;
    const json_t *t = json_object_get(schema, "type");
    if (json_is_string(t)) bits |= type_bit(json_string_value(t));
    for (size_t i = 0; json_is_array(t) && i < json_array_size(t); i++)
        if (json_is_string(json_array_get(t, i))) bits |= type_bit(json_string_value(json_array_get(t, i)));
    static const char *const unions[] = {"anyOf", "oneOf"};
    for (int u = 0; u < 2; u++) {
        const json_t *alts = json_object_get(schema, unions[u]);
        for (size_t i = 0; json_is_array(alts) && i < json_array_size(alts); i++)
            bits |= schema_types(json_array_get(alts, i), depth + 1);
    }
    if (bits) return bits;
    const json_t *en = json_object_get(schema, "enum");
    for (size_t i = 0; json_is_array(en) && i < json_array_size(en); i++) bits |= lilac_json_type(json_array_get(en, i));
    if (json_object_get(schema, "const")) bits |= lilac_json_type(json_object_get(schema, "const"));
    if (bits) return bits;
    if (json_object_get(schema, "properties")) bits |= LILAC_PT_OBJECT;
    if (json_object_get(schema, "items")) bits |= LILAC_PT_ARRAY;
    return bits;
}

unsigned lilac_parse_schema_types(const json_t *schema) { return schema_types(schema, 0); }

/* 1 if the n bytes at s, without surrounding whitespace, are word in any case. */
static int is_word(const char *s, size_t n, const char *word) {
    while (n && strchr(" \t\r\n", s[0])) s++, n--;
    while (n && strchr(" \t\r\n", s[n - 1])) n--;
    return n == strlen(word) && strncasecmp(s, word, n) == 0;
}

/* Python's spellings of the literals (Qwen3.5's template wrote values with
 * str(), and models trained on it still do). */
static json_t *python_literal(const char *s, size_t n, unsigned types) {
    if (types & LILAC_PT_BOOLEAN) {
        if (is_word(s, n, "true")) return json_true();
        if (is_word(s, n, "false")) return json_false();
    }
    if ((types & LILAC_PT_NULL) && (is_word(s, n, "null") || is_word(s, n, "none"))) return json_null();
    return NULL;
}

json_t *lilac_parse_typed_value(const char *s, size_t n, unsigned types) {
    if (types == LILAC_PT_STRING) return json_stringn(s, n);
    json_error_t err;
    json_t *v = json_loadb(s, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    if (!v) v = python_literal(s, n, types);
    if (types == 0) {
        /* No schema: the template writes strings raw and everything else as
         * JSON, so JSON that is not a string literal was meant as JSON. */
        if (v && !json_is_string(v)) return v;
        json_decref(v);
        return json_stringn(s, n);
    }
    if (v) {
        unsigned got = lilac_json_type(v);
        /* An integer is also a number.  A quoted string where strings are
         * allowed keeps its quotes: strings are written raw, so the quotes
         * are part of the value. */
        if (got != LILAC_PT_STRING &&
            ((got & types) || (got == LILAC_PT_INTEGER && (types & LILAC_PT_NUMBER))))
            return v;
        if (!(types & LILAC_PT_STRING)) return v; /* JSON of another type beats a raw string */
        json_decref(v);
    }
    return json_stringn(s, n);
}
