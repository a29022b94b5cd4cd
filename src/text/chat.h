/* chat.h — the Qwen3.6 chat template, hard-coded in C.
 *
 * Renders an OpenAI chat-completions request body into the prompt string
 * that tests/fixtures/templates/qwen3.6-35b-a3b.chat_template.jinja renders
 * under transformers' Jinja environment, byte for byte (the template is the
 * authority; docs: shared spec chat-format.md).  There is no Jinja
 * interpreter: the template's logic is written out in chat.c, and the
 * Python string semantics it relies on live in chat_pystr.c.
 *
 * What is read from the request (a jansson object):
 *   messages               array of {role, content, reasoning_content,
 *                          tool_calls}; content is a string, null/absent, or
 *                          a list of parts (text / image / image_url / video)
 *   tools                  array (each entry written with Python json.dumps)
 *   add_generation_prompt  boolean, default true
 *   chat_template_kwargs   object: enable_thinking, preserve_thinking,
 *                          add_vision_id, add_generation_prompt
 * As in vLLM, chat_template_kwargs are merged over the top-level values, so
 * chat_template_kwargs.add_generation_prompt wins over the top-level field.
 * Values inside chat_template_kwargs are tested exactly as the template tests
 * them: `enable_thinking is false` only for JSON false, `preserve_thinking is
 * true` only for JSON true, add_vision_id / add_generation_prompt by Python
 * truthiness.  Other keys are ignored (the template does not read them),
 * except `messages` and `tools`, which are refused: transformers would fail
 * on a duplicate `messages`, and vLLM would let `tools` replace the
 * top-level tools, which no client means to do.
 *
 * Tool-call `arguments` may be a JSON string (as OpenAI clients send it; it
 * is parsed, keeping key order, as vLLM does before rendering) or an object.
 *
 * Errors — two kinds, told apart by the status code:
 *   LILAC_CHAT_ETEMPLATE (LILAC_EINVAL): the template itself raised; e->msg
 *       is exactly the template's text, e.g. "No user query found in
 *       messages." — the request is well formed but the template refuses it.
 *   LILAC_CHAT_EREQUEST (LILAC_EFORMAT): the request has a shape the template
 *       cannot render (messages not an array, a message not an object, role
 *       not a string, arguments not a JSON object, ...); e->msg names what and
 *       where, e.g. "messages[2].tool_calls[0].function.arguments: not valid
 *       JSON: ...".  The request is checked whole before rendering, so a
 *       request-shape error is reported even when the template would also
 *       have raised.
 *   LILAC_ENOMEM: out of memory.
 */
#ifndef LILAC_TEXT_CHAT_H
#define LILAC_TEXT_CHAT_H

#include <jansson.h>
#include <stddef.h>

#include "util/buf.h"
#include "util/err.h"

#define LILAC_CHAT_ETEMPLATE LILAC_EINVAL
#define LILAC_CHAT_EREQUEST LILAC_EFORMAT

/* Where things are in the rendered prompt, for the prefix cache.  Offsets
 * are bytes from the start of the prompt (not of the output buffer, when it
 * held something before). */
typedef struct {
    size_t n_messages;
    /* [n_messages]: where message i's rendering starts.  Message i's bytes
     * are [message_offset[i], message_offset[i+1]) (the last one ends at
     * generation_offset).  A leading system message starts at 0 and its span
     * includes the tool declarations; without one, the tool declarations
     * come before message 0.  A run of tool messages shares one user turn:
     * the first tool message's span holds "<|im_start|>user", the last one's
     * the "<|im_end|>\n".  Note that earlier spans are not always stable as
     * messages are appended: an assistant turn before the last real user
     * query loses its think block (unless preserve_thinking), and a tool
     * message that stops being the last of its run loses its "<|im_end|>\n". */
    size_t *message_offset;
    size_t generation_offset;  /* where the generation prompt starts; the
                                  prompt length when there is none */
    int add_generation_prompt; /* a generation prompt was written */
    int thinking;              /* the prompt ends inside an open <think>
                                  block: the model's output starts with
                                  reasoning, up to "</think>" */
} lilac_chat_info;

/* Appends the rendered prompt to out.  info may be NULL; when given it is
 * filled on success (free it with lilac_chat_info_free) and zeroed on
 * failure.  On failure out is left as it was. */
lilac_status lilac_chat_render(const json_t *request, lilac_buf *out, lilac_chat_info *info,
                               lilac_error *e);

/* Refuses every content part that is not text: images, videos, audio, files
 * (lilac loads the text model only, so the template's vision placeholders
 * would reach the model with nothing behind them).  A part is text when the
 * template takes it as text ("text" key, no image/video key) and its "type",
 * if any, is "text".  Returns LILAC_CHAT_EREQUEST with e->msg starting with
 * the part's path, "messages[i].content[j].type: ..."; where (cap bytes,
 * may be NULL) receives that path.  Parts that are not objects are left for
 * lilac_chat_render to refuse.  lilac_chat_render itself still renders
 * media parts as the template does (its golden tests need that). */
lilac_status lilac_chat_check_text_only(const json_t *request, char *where, size_t cap, lilac_error *e);

/* Frees what lilac_chat_render allocated in info and zeroes it; NULL is fine. */
void lilac_chat_info_free(lilac_chat_info *info);

#endif
