/* parse.h — the incremental parser of the model's output: reasoning, content
 * and Qwen XML tool calls, turned into OpenAI message fields.
 *
 * The text is fed in whatever fragments the detokenizer produces (a fragment
 * may end anywhere, even inside a tag or a UTF-8 character).  The parser
 * reports typed deltas through a callback as soon as they are certain, and
 * keeps the final (non-streaming) result.  Guarantees:
 *
 *   - the concatenation of the deltas of each kind equals the final result
 *     (reasoning, content, and per tool call its arguments string);
 *   - the final result depends only on the whole text, never on how it was
 *     split into fragments;
 *   - text is held back only while it could still be the start of a tag, a
 *     run of whitespace that may turn out to be a separator (see below), or
 *     an incomplete UTF-8 character; finish() flushes everything.  Text
 *     deltas therefore never split a UTF-8 character of valid input;
 *   - malformed output never crashes the parser and is never dropped: what
 *     cannot be parsed is returned as content, byte for byte.
 *
 * Format (docs: shared/spec/chat-format.md §3):
 *
 *   reasoning.  With LILAC_PARSE_THINK_OPEN (the prompt ended in "<think>\n")
 *   everything before the first "</think>" is reasoning; otherwise the output
 *   opens a think block itself only when it starts (after whitespace) with
 *   "<think>".  Newlines around the reasoning and newlines at the start of
 *   the content after "</think>" are removed.  Output that ends before
 *   "</think>" is all reasoning.  Nothing inside reasoning is a tool call.
 *
 *   tool calls (LILAC_PARSE_TOOLS only, and only in content):
 *       <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n...
 *       </function>\n</tool_call>
 *   A call is accepted ("committed") once "<tool_call>", optional whitespace
 *   (at most 64 bytes) and "<function=NAME>" have been read and NAME is one of
 *   the request's tools (any NAME of up to 256 bytes without whitespace or
 *   '<' when tools is NULL).  Before that point nothing is emitted; if the
 *   text turns out to be something else ("<tool_call>" followed by JSON, an
 *   unknown function, garbage, end of output) it is all content.  After that
 *   point the tool-call start delta has been sent, so problems are handled
 *   like this:
 *     - a parameter VALUE is the text up to the first "</parameter>", minus
 *       one leading and one trailing "\n"; values may hold newlines, '<' and
 *       XML-looking text;
 *     - "</tool_call>" without "</function>", and the end of output after a
 *       complete parameter or after "</function>", close the call normally;
 *     - anything else where a parameter or a closing tag is expected, and an
 *       unterminated parameter at the end of output, close the call with the
 *       parameters completed so far, and the unparsed rest is content
 *       (verbatim, and scanned again for later tool calls).
 *   Whitespace between content and tool calls and between calls is a
 *   separator, not content; so trailing whitespace of content is held back
 *   while tools are parsed.  Without LILAC_PARSE_TOOLS "<tool_call>" is plain
 *   content.  Only the Qwen3-Coder XML form is a tool call; a "<function=" not
 *   inside "<tool_call>" is content.
 *
 *   arguments: a JSON object string written as Python's json.dumps does,
 *   keys in the order the model wrote them (a repeated key is written twice;
 *   bytes that are not UTF-8 become U+FFFD there, while content and reasoning
 *   keep every byte as it came).
 *   Each value is typed by the tool's schema,
 *   tools[i].function.parameters.properties.KEY:
 *     - "type": "string" (only) keeps the raw text, even "42" or "null";
 *     - other types (integer, number, boolean, null, array, object, and type
 *       lists / anyOf / oneOf, whose types are united; enum and const lend
 *       their values' types) parse the text as JSON and keep the result when
 *       its type is allowed; otherwise the raw text when "string" is allowed,
 *       else the parsed JSON when the text is JSON at all, else the raw text.
 *       For boolean and null, Python spellings (True, False, None) count too;
 *     - a key not in the schema, or with no type information, is JSON when
 *       the text parses as a JSON number, literal, array or object, and the
 *       raw text otherwise (the template writes non-strings as JSON).
 *   Ids are "call_" + 24 letters and digits from a generator seeded by the
 *   caller, so runs are reproducible.
 */
#ifndef LILAC_TEXT_PARSE_H
#define LILAC_TEXT_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util/err.h"

enum {
    LILAC_PARSE_THINK_OPEN = 1, /* the prompt ended inside an opened <think> block */
    LILAC_PARSE_TOOLS = 2,      /* recognise tool calls (off for tool_choice "none" / no tools) */
};

typedef enum {
    LILAC_DELTA_REASONING,  /* text: more reasoning_content */
    LILAC_DELTA_CONTENT,    /* text: more content */
    LILAC_DELTA_TOOL_START, /* index, id, name: a new tool call; comes before its arguments */
    LILAC_DELTA_TOOL_ARGS,  /* index, text: the next piece of that call's arguments string */
} lilac_delta_kind;

typedef struct {
    lilac_delta_kind kind;
    int index;        /* tool call index, 0-based (TOOL_START, TOOL_ARGS); -1 otherwise */
    const char *text; /* REASONING, CONTENT, TOOL_ARGS: len bytes, NUL-terminated */
    size_t len;
    const char *id;   /* TOOL_START: "call_..." */
    const char *name; /* TOOL_START: the function name */
} lilac_delta;

/* Receives each delta; the pointers are valid only during the call. */
typedef void (*lilac_delta_fn)(void *ctx, const lilac_delta *d);

typedef struct lilac_parser lilac_parser;

/* tools: the request's "tools" array (the parser keeps a reference), or NULL.
 * flags: LILAC_PARSE_*.  seed: seeds the tool-call id generator.
 * Fails with LILAC_EINVAL when tools is not an array, LILAC_ENOMEM. */
lilac_status lilac_parser_new(json_t *tools, unsigned flags, uint64_t seed, lilac_parser **out,
                              lilac_error *e);
void lilac_parser_free(lilac_parser *p);

/* Feeds the next n bytes of output.  cb may be NULL (non-streaming use).
 * Fails with LILAC_ENOMEM, or LILAC_EINVAL after finish. */
lilac_status lilac_parser_feed(lilac_parser *p, const char *text, size_t n, lilac_delta_fn cb,
                               void *ctx, lilac_error *e);

/* The output has ended: decides everything still held back and reports it.
 * Calling it again does nothing. */
lilac_status lilac_parser_finish(lilac_parser *p, lilac_delta_fn cb, void *ctx, lilac_error *e);

/* The final result, complete after finish (before it: what was reported so
 * far).  content and reasoning are NULL when empty (OpenAI's "content": null
 * for a message made only of tool calls); *len (may be NULL) gets the length,
 * since model text may contain NUL bytes. */
const char *lilac_parser_content(const lilac_parser *p, size_t *len);
const char *lilac_parser_reasoning(const lilac_parser *p, size_t *len);

/* The OpenAI tool_calls array: [{"id", "type": "function", "function":
 * {"name", "arguments"}}], borrowed (never NULL; empty when there are none). */
json_t *lilac_parser_tool_calls(const lilac_parser *p);

/* The number of tool calls made (> 0: finish_reason "tool_calls"). */
size_t lilac_parser_ntool_calls(const lilac_parser *p);

#endif
