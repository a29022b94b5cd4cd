/* fuzz_chat.c — libFuzzer target: any bytes as a chat-completions request
 * body, parsed as the server parses it and rendered with the chat template. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "text/chat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_error_t je;
    json_t *req = json_loadb((const char *)data, size, JSON_ALLOW_NUL, &je);
    if (!req) return 0;
    lilac_buf out = LILAC_BUF_INIT;
    lilac_chat_info info;
    lilac_error e;
    if (lilac_chat_render(req, &out, &info, &e) == LILAC_OK) lilac_chat_info_free(&info);
    lilac_buf_free(&out);
    json_decref(req);
    return 0;
}
