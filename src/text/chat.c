/* chat.c — renders a chat request with the Qwen3.6 template's logic (see
 * chat.h).  The request is checked and flattened by chat_req.c first; this
 * file follows tests/fixtures/templates/qwen3.6-35b-a3b.chat_template.jinja
 * step by step, in the same order, so that template errors come out in the
 * same order as Jinja raises them:
 *   1. no messages                          "No messages provided."
 *   2. tool declarations + leading system   (system content errors)
 *   3. backwards scan for the last real user query (user content errors),
 *      then "No user query found in messages."
 *   4. each message in order: its content (content errors), then the role
 *      ("System message must be at the beginning.", "Unexpected message role.")
 *   5. the generation prompt. */
#include "text/chat.h"

#include <stdlib.h>
#include <string.h>

#include "text/chat_pystr.h"
#include "text/chat_req.h"
#include "text/pyjson.h"

/* The fixed text of the tool-declaration block, before and after the tool
 * list, copied from the template. */
static const char TOOLS_HEAD[] =
    "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>";
static const char TOOLS_TAIL[] =
    "\n</tools>"
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n"
    "- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested "
    "within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n"
    "- You may provide optional reasoning for your function call in natural language BEFORE the function call, but "
    "NOT after\n"
    "- If there is no function call available, answer the question like normal with your current knowledge and do "
    "not tell the user about function calls\n"
    "</IMPORTANT>";

typedef struct {
    const lilac_chat_req *req;
    int image_count, video_count; /* the template's namespaces of the same names */
    lilac_buf scratch;            /* the current message's rendered content */
    lilac_buf *out;
} renderer;

static lilac_status template_error(lilac_error *e, const char *msg) {
    return lilac_fail(e, LILAC_CHAT_ETEMPLATE, "%s", msg);
}

static void put_view(lilac_buf *b, lilac_strview v) { lilac_buf_append(b, v.p, v.n); }

static lilac_strview json_view(const json_t *s) {
    lilac_strview v = {json_string_value(s), json_string_length(s)};
    return v;
}

/* The template's render_content macro followed by |trim.  The result views
 * r->scratch and is valid until the next call. */
static lilac_status render_content(renderer *r, const json_t *content, int do_vision_count, int is_system,
                                   lilac_strview *res, lilac_error *e) {
    lilac_buf *b = &r->scratch;
    lilac_buf_clear(b);
    if (json_is_string(content)) {
        put_view(b, json_view(content));
    } else if (json_is_array(content)) {
        for (size_t k = 0; k < json_array_size(content); k++) {
            const json_t *item = json_array_get(content, k); /* an object: chat_req.c checked */
            switch (lilac_chat_part_kind(item)) {
            case LILAC_CHAT_PART_IMAGE:
                if (is_system) return template_error(e, "System message cannot contain images.");
                if (do_vision_count) r->image_count++;
                if (r->req->add_vision_id) lilac_buf_printf(b, "Picture %d: ", r->image_count);
                lilac_buf_puts(b, "<|vision_start|><|image_pad|><|vision_end|>");
                break;
            case LILAC_CHAT_PART_VIDEO:
                if (is_system) return template_error(e, "System message cannot contain videos.");
                if (do_vision_count) r->video_count++;
                if (r->req->add_vision_id) lilac_buf_printf(b, "Video %d: ", r->video_count);
                lilac_buf_puts(b, "<|vision_start|><|video_pad|><|vision_end|>");
                break;
            case LILAC_CHAT_PART_TEXT:
                put_view(b, json_view(json_object_get(item, "text"))); /* a string: chat_req.c checked */
                break;
            case LILAC_CHAT_PART_UNKNOWN:
                return template_error(e, "Unexpected item type in content.");
            }
        }
    } else if (content && !json_is_null(content)) {
        return template_error(e, "Unexpected content type.");
    }
    lilac_strview all = {b->data ? b->data : "", b->len};
    *res = lilac_pystr_strip(all);
    return LILAC_OK;
}

/* Tool declarations and/or the leading system message. */
static lilac_status render_header(renderer *r, lilac_error *e) {
    const lilac_chat_req *q = r->req;
    int has_system = q->msgs[0].role == LILAC_CHAT_SYSTEM;
    lilac_strview content = {"", 0};
    if (has_system) {
        lilac_status st = render_content(r, q->msgs[0].content, 0, 1, &content, e);
        if (st) return st;
    }
    if (q->tools) {
        lilac_buf_puts(r->out, TOOLS_HEAD);
        for (size_t i = 0; i < json_array_size(q->tools); i++) {
            lilac_buf_putc(r->out, '\n');
            lilac_pyjson_dump(json_array_get(q->tools, i), r->out);
        }
        lilac_buf_puts(r->out, TOOLS_TAIL);
        if (content.n) {
            lilac_buf_puts(r->out, "\n\n");
            put_view(r->out, content);
        }
        lilac_buf_puts(r->out, "<|im_end|>\n");
    } else if (has_system) {
        lilac_buf_puts(r->out, "<|im_start|>system\n");
        put_view(r->out, content);
        lilac_buf_puts(r->out, "<|im_end|>\n");
    }
    return LILAC_OK;
}

/* The index of the last user message whose trimmed content is not wholly a
 * <tool_response> block (tool results sent back as user turns). */
static lilac_status last_query_index(renderer *r, size_t *index, lilac_error *e) {
    for (size_t i = r->req->n_msgs; i-- > 0;) {
        const lilac_chat_msg *m = &r->req->msgs[i];
        if (m->role != LILAC_CHAT_USER) continue;
        lilac_strview c;
        lilac_status st = render_content(r, m->content, 0, 0, &c, e);
        if (st) return st;
        if (!(lilac_pystr_startswith(c, "<tool_response>") && lilac_pystr_endswith(c, "</tool_response>"))) {
            *index = i;
            return LILAC_OK;
        }
    }
    return template_error(e, "No user query found in messages.");
}

static void render_call(renderer *r, const lilac_chat_call *call, int first, lilac_strview content) {
    lilac_buf *o = r->out;
    /* the first call is set off by a blank line only when `content|trim` is non-empty */
    if (!first) lilac_buf_puts(o, "\n<tool_call>\n<function=");
    else if (lilac_pystr_strip(content).n) lilac_buf_puts(o, "\n\n<tool_call>\n<function=");
    else lilac_buf_puts(o, "<tool_call>\n<function=");
    put_view(o, call->name);
    lilac_buf_puts(o, ">\n");
    if (call->args) {
        const char *key;
        size_t klen;
        json_t *val;
        json_object_keylen_foreach(call->args, key, klen, val) {
            lilac_buf_puts(o, "<parameter=");
            lilac_buf_append(o, key, klen);
            lilac_buf_puts(o, ">\n");
            /* strings raw (`| string`), everything else `| tojson` */
            if (json_is_string(val)) put_view(o, json_view(val));
            else lilac_pyjson_dump(val, o);
            lilac_buf_puts(o, "\n</parameter>\n");
        }
    }
    lilac_buf_puts(o, "</function>\n</tool_call>");
}

static void render_assistant(renderer *r, const lilac_chat_msg *m, int with_think, lilac_strview content) {
    lilac_strview reasoning = {"", 0};
    if (m->reasoning) {
        reasoning = json_view(m->reasoning);
    } else if (lilac_pystr_contains(content, "</think>")) {
        /* content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
        reasoning = lilac_pystr_split_first(content, "</think>");
        reasoning = lilac_pystr_rstrip_char(reasoning, '\n');
        reasoning = lilac_pystr_split_last(reasoning, "<think>");
        reasoning = lilac_pystr_lstrip_char(reasoning, '\n');
        /* content.split('</think>')[-1].lstrip('\n') */
        content = lilac_pystr_lstrip_char(lilac_pystr_split_last(content, "</think>"), '\n');
    }
    reasoning = lilac_pystr_strip(reasoning);
    lilac_buf *o = r->out;
    if (with_think) {
        lilac_buf_puts(o, "<|im_start|>assistant\n<think>\n");
        put_view(o, reasoning);
        lilac_buf_puts(o, "\n</think>\n\n");
    } else {
        lilac_buf_puts(o, "<|im_start|>assistant\n");
    }
    put_view(o, content);
    for (size_t c = 0; c < m->n_calls; c++) render_call(r, &m->calls[c], c == 0, content);
    lilac_buf_puts(o, "<|im_end|>\n");
}

static lilac_status render_messages(renderer *r, size_t *offsets, lilac_error *e) {
    const lilac_chat_req *q = r->req;
    size_t last_query = 0;
    lilac_status st = last_query_index(r, &last_query, e);
    if (st) return st;
    for (size_t i = 0; i < q->n_msgs; i++) {
        const lilac_chat_msg *m = &q->msgs[i];
        /* a leading system message was written with the header, at 0 */
        offsets[i] = (i == 0 && m->role == LILAC_CHAT_SYSTEM) ? 0 : r->out->len;
        lilac_strview content;
        st = render_content(r, m->content, 1, 0, &content, e);
        if (st) return st;
        switch (m->role) {
        case LILAC_CHAT_SYSTEM:
            if (i != 0) return template_error(e, "System message must be at the beginning.");
            break;
        case LILAC_CHAT_USER:
            lilac_buf_puts(r->out, "<|im_start|>user\n");
            put_view(r->out, content);
            lilac_buf_puts(r->out, "<|im_end|>\n");
            break;
        case LILAC_CHAT_ASSISTANT:
            render_assistant(r, m, q->preserve_thinking || i > last_query, content);
            break;
        case LILAC_CHAT_TOOL:
            /* loop.previtem is undefined for the first message: a tool
             * message there opens no user turn, exactly as the template. */
            if (i > 0 && q->msgs[i - 1].role != LILAC_CHAT_TOOL) lilac_buf_puts(r->out, "<|im_start|>user");
            lilac_buf_puts(r->out, "\n<tool_response>\n");
            put_view(r->out, content);
            lilac_buf_puts(r->out, "\n</tool_response>");
            if (i + 1 == q->n_msgs || q->msgs[i + 1].role != LILAC_CHAT_TOOL) lilac_buf_puts(r->out, "<|im_end|>\n");
            break;
        case LILAC_CHAT_OTHER:
            return template_error(e, "Unexpected message role.");
        }
    }
    return LILAC_OK;
}

static lilac_status render(renderer *r, size_t *offsets, size_t *gen_offset, lilac_error *e) {
    if (r->req->n_msgs == 0) return template_error(e, "No messages provided.");
    lilac_status st = render_header(r, e);
    if (st) return st;
    st = render_messages(r, offsets, e);
    if (st) return st;
    *gen_offset = r->out->len;
    if (r->req->add_generation_prompt) {
        lilac_buf_puts(r->out, "<|im_start|>assistant\n");
        lilac_buf_puts(r->out, r->req->thinking_off ? "<think>\n\n</think>\n\n" : "<think>\n");
    }
    return LILAC_OK;
}

lilac_status lilac_chat_render(const json_t *request, lilac_buf *out, lilac_chat_info *info, lilac_error *e) {
    if (info) memset(info, 0, sizeof *info);
    lilac_chat_req req;
    lilac_status st = lilac_chat_req_parse(request, &req, e);
    if (st) {
        lilac_chat_req_free(&req);
        return st;
    }
    size_t *offsets = calloc(req.n_msgs ? req.n_msgs : 1, sizeof *offsets);
    if (!offsets) {
        lilac_chat_req_free(&req);
        return lilac_fail(e, LILAC_ENOMEM, "out of memory for %zu message offsets", req.n_msgs);
    }
    /* Render into a fresh buffer so that a failure leaves `out` untouched. */
    lilac_buf prompt = LILAC_BUF_INIT;
    renderer r = {&req, 0, 0, LILAC_BUF_INIT, &prompt};
    size_t gen_offset = 0;
    st = render(&r, offsets, &gen_offset, e);
    if (!st && (prompt.oom || r.scratch.oom)) st = lilac_fail(e, LILAC_ENOMEM, "out of memory rendering the prompt");
    if (!st) {
        lilac_buf_append(out, prompt.data ? prompt.data : "", prompt.len);
        if (out->oom) st = lilac_fail(e, LILAC_ENOMEM, "out of memory appending the prompt");
    }
    if (!st && info) {
        info->n_messages = req.n_msgs;
        info->message_offset = offsets;
        offsets = NULL;
        info->generation_offset = gen_offset;
        info->add_generation_prompt = req.add_generation_prompt;
        info->thinking = req.add_generation_prompt && !req.thinking_off;
    }
    free(offsets);
    lilac_buf_free(&prompt);
    lilac_buf_free(&r.scratch);
    lilac_chat_req_free(&req);
    return st;
}

void lilac_chat_info_free(lilac_chat_info *info) {
    if (!info) return;
    free(info->message_offset);
    memset(info, 0, sizeof *info);
}
