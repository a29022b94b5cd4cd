/* chat_req.h — the request side of the chat renderer: checks the shape of an
 * OpenAI chat-completions body and turns it into a flat view that chat.c
 * renders.  Internal to src/text/chat*.c.
 *
 * Owns: every request-shape error (LILAC_CHAT_EREQUEST, "what: where"
 * messages), parsing tool-call `arguments` strings into ordered objects, the
 * merge of chat_template_kwargs over top-level options, and the
 * classification of content parts.  It raises no template errors: anything
 * the template itself would reject is left for chat.c to raise in the
 * template's own order. */
#ifndef LILAC_TEXT_CHAT_REQ_H
#define LILAC_TEXT_CHAT_REQ_H

#include <jansson.h>
#include <stddef.h>

#include "text/chat.h"
#include "text/chat_pystr.h"

typedef enum {
    LILAC_CHAT_SYSTEM,
    LILAC_CHAT_USER,
    LILAC_CHAT_ASSISTANT,
    LILAC_CHAT_TOOL,
    LILAC_CHAT_OTHER, /* any other role string: the template raises on it */
} lilac_chat_role;

typedef enum {
    LILAC_CHAT_PART_IMAGE,
    LILAC_CHAT_PART_VIDEO,
    LILAC_CHAT_PART_TEXT,
    LILAC_CHAT_PART_UNKNOWN, /* the template raises "Unexpected item type in content." */
} lilac_chat_part;

typedef struct {
    lilac_strview name; /* function name (points into the request) */
    json_t *args;       /* owned reference to an object, or NULL: no "arguments" key */
} lilac_chat_call;

typedef struct {
    lilac_chat_role role;
    const json_t *content;   /* as given; NULL when absent */
    const json_t *reasoning; /* reasoning_content when it is a string, else NULL */
    lilac_chat_call *calls;  /* assistant tool calls, [n_calls] */
    size_t n_calls;
} lilac_chat_msg;

typedef struct {
    lilac_chat_msg *msgs; /* [n_msgs] */
    size_t n_msgs;
    const json_t *tools;  /* a non-empty array, or NULL: no tool declarations */
    int add_generation_prompt;
    int thinking_off;      /* enable_thinking is false (JSON false only) */
    int preserve_thinking; /* preserve_thinking is true (JSON true only) */
    int add_vision_id;     /* truthy */
} lilac_chat_req;

/* Checks the request and fills r (free it with lilac_chat_req_free, also
 * after a failure). */
lilac_status lilac_chat_req_parse(const json_t *request, lilac_chat_req *r, lilac_error *e);
void lilac_chat_req_free(lilac_chat_req *r);

/* What the template makes of one content-list item (an object), in the
 * template's order of tests: a key "image" or "image_url", or type ==
 * "image", is an image; else a key "video" or type == "video" is a video;
 * else a key "text" is text; else it is unknown. */
lilac_chat_part lilac_chat_part_kind(const json_t *item);

#endif
