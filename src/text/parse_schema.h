/* parse_schema.h — typing a tool call's parameter values by the request's
 * JSON schemas (internal to the output parser; the rules are documented in
 * text/parse.h).  Knows nothing about the XML format or streaming. */
#ifndef LILAC_TEXT_PARSE_SCHEMA_H
#define LILAC_TEXT_PARSE_SCHEMA_H

#include <stddef.h>

#include <jansson.h>

/* A set of JSON types; 0 means "no type information". */
enum {
    LILAC_PT_STRING = 1,
    LILAC_PT_INTEGER = 2,
    LILAC_PT_NUMBER = 4,
    LILAC_PT_BOOLEAN = 8,
    LILAC_PT_NULL = 16,
    LILAC_PT_ARRAY = 32,
    LILAC_PT_OBJECT = 64,
};

/* The type bit of a JSON value (integer and real told apart, as JSON Schema does). */
unsigned lilac_json_type(const json_t *v);

/* Looks for the function called name (n bytes) in an OpenAI tools array
 * (entries {"type": "function", "function": {...}} or a bare function
 * object).  Returns 1 and sets *props to its parameters.properties object
 * (NULL when it has none) when found, 0 otherwise. */
int lilac_parse_find_tool(const json_t *tools, const char *name, size_t n, const json_t **props);

/* The types a property schema allows: "type" (a name or a list of names),
 * the union over anyOf/oneOf members, else the types of enum/const values,
 * else object/array when "properties"/"items" is present. */
unsigned lilac_parse_schema_types(const json_t *schema);

/* The JSON value for the n bytes of raw parameter text s (valid UTF-8),
 * given the allowed types.  Returns a new reference; NULL only when out of
 * memory. */
json_t *lilac_parse_typed_value(const char *s, size_t n, unsigned types);

#endif
